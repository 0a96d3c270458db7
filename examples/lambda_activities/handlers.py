"""Lambda activity handlers.

Each handler gets the launcher's payload, runs its work inside
``Whimbrel.run_activity`` (RUNNING, background heartbeats, then COMPLETED with the
output or FAILED with the error) and returns. The client is built once per container
from WHIMBREL_TABLE_PREFIX (and the region of the function), with the AWS launchers:
recording an end runs its follow-ups here, and those launch the next activities
(``validate`` completing invokes the three renders), which are Lambda functions too.
"""

from __future__ import annotations

from typing import Any

from whimbrel import Whimbrel
from whimbrel.launch.aws import aws_launchers

wb = Whimbrel.from_env(launchers=aws_launchers())


def _run(event: dict[str, Any], work: Any) -> None:
    ids = event["whimbrel"]
    with wb.run_activity(ids["activity_exec_id"]) as act:
        act.output = work(act, event.get("input") or {})


def validate(event: dict[str, Any], context: Any) -> None:
    def work(act: Any, _: dict[str, Any]) -> dict[str, Any]:
        key = act.input["s3_key"]
        if not key.lower().endswith((".jpg", ".jpeg", ".png")):
            raise ValueError(f"{key} is not an image")  # FAILED, no retry configured
        return {"s3_key": key}

    _run(event, work)


def render(event: dict[str, Any], context: Any) -> None:
    def work(act: Any, config: dict[str, Any]) -> dict[str, Any]:
        width = int(config["width"])
        source = act.upstream["validate"]["s3_key"]
        # Real code: download, resize with Pillow, upload; heartbeat between chunks.
        act.heartbeat()
        return {"width": width, "s3_key": f"thumbs/{width}/{source}"}

    _run(event, work)


def index(event: dict[str, Any], context: Any) -> None:
    _run(event, lambda act, _: {"thumbnails": sorted(v["s3_key"]
                                                     for v in act.upstream.values())})
