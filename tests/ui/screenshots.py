"""Screenshots of the console for docs/console.md, taken by the test tooling.

    .venv/bin/python -m tests.ui.screenshots [--out docs/img]

Starts a throw-away DynamoDB Local, fills it with a few workflows in every state (the
clock is injected, so runs spread over the last hours without waiting), serves the
console and saves ``console_runs.png``, ``console_run.png``, ``console_fanout.png``,
``console_definition.png`` and ``console_confirm.png``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ui_support import TOKEN, chromium, console, shoot

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.testing import StepClock, dynamodb_local, fresh_table_prefix

EXT = LauncherSpec.external()
ETL = WorkflowDefinition("nightly-etl", (
    Act("extract", launcher=EXT, heartbeat_timeout_seconds=120),
    Act("clean_orders", ("extract",), launcher=EXT, heartbeat_timeout_seconds=120),
    Act("clean_customers", ("extract",), launcher=EXT, heartbeat_timeout_seconds=120),
    Act("clean_events", ("extract",), launcher=EXT,
        retry=RetryPolicy(max_attempts=3, initial_interval_seconds=300)),
    Act("join", ("clean_orders", "clean_customers", "clean_events"), launcher=EXT),
    Act("report", ("join",), launcher=EXT),
    Act("export_s3", ("join",), launcher=EXT),
), description="Orders, customers and events into the warehouse every night")
INVOICES = WorkflowDefinition("invoice-batch", (
    Act("select", launcher=EXT),
    Act("render", ("select",), launcher=EXT),
    Act("send", ("render",), launcher=EXT),
), description="Render and send the day's invoices")
TRAIN = WorkflowDefinition("ml-train", (
    Act("snapshot", launcher=EXT),
    Act("features", ("snapshot",), launcher=EXT),
    Act("train", ("features",), launcher=EXT, heartbeat_timeout_seconds=600),
    Act("evaluate", ("train",), launcher=EXT),
    Act("publish", ("evaluate",), launcher=EXT),
), description="Weekly model training")
THUMBS = WorkflowDefinition("thumbnails", (
    Act("list_images", launcher=EXT),
    *(Act(f"resize_{i:03d}", ("list_images",), launcher=EXT) for i in range(60)),
    Act("publish_index", tuple(f"resize_{i:03d}" for i in range(60)), launcher=EXT),
), description="One resize per image, then the index")


def act(wb: Whimbrel, wx: str, name: str, *moves: str, error: str | None = None,
        output: object = None) -> None:
    aeid = wb.get_workflow(wx).activity(name).activity_exec_id
    for move in moves:
        wb.transition_activity(aeid, move, error=error if move == "FAILED" else None,
                               output=output if move == "COMPLETED" else None)


def showcase(wb: Whimbrel, clock: StepClock) -> tuple[str, str]:
    """Runs in every state over the last hours; returns the ids of the runs to show
    (a DAG in progress, and a wide fan-out)."""
    for d in (ETL, INVOICES, TRAIN, THUMBS):
        wb.register_workflow(d)
    ok = {"rows": 18234, "bytes": 5_120_044}
    for i in range(14):
        name = ("invoice-batch", "ml-train", "nightly-etl")[i % 3]
        wx = wb.start_workflow(name, {"batch": i})
        defn = wb.get_definition(name)
        clock.advance(431)
        if i in (3, 8):
            first = defn.topological_order()[0]
            act(wb, wx, first, "RUNNING", "FAILED",
                error="ConnectionError: warehouse refused the connection (timeout 30 s)")
            continue
        if i == 11:
            wb.cancel_workflow(wx)
            continue
        for step in defn.topological_order():
            act(wb, wx, step, "RUNNING", "COMPLETED", output=ok)
            clock.advance(17)
    for i in range(3):
        wx = wb.start_workflow("invoice-batch", {"batch": 100 + i})
        act(wb, wx, "select", "RUNNING")
        clock.advance(95)
    thumbs = wb.start_workflow("thumbnails", {"bucket": "s3://photos/2026-11-21"})
    act(wb, thumbs, "list_images", "RUNNING", "COMPLETED", output={"images": 60})
    for i in range(0, 60, 2):
        act(wb, thumbs, f"resize_{i:03d}", "RUNNING")
        clock.advance(1.7)
        act(wb, thumbs, f"resize_{i:03d}", "COMPLETED")
    for i in range(1, 12, 2):
        act(wb, thumbs, f"resize_{i:03d}", "RUNNING")
    clock.advance(120)
    wx = wb.start_workflow("nightly-etl", {"day": "2026-11-21", "full_refresh": False})
    clock.advance(3)
    act(wb, wx, "extract", "RUNNING")
    clock.advance(41)
    act(wb, wx, "extract", "COMPLETED", output=ok)
    act(wb, wx, "clean_orders", "RUNNING")
    clock.advance(12)
    act(wb, wx, "clean_orders", "COMPLETED", output={"orders": 9120})
    act(wb, wx, "clean_customers", "RUNNING")
    act(wb, wx, "clean_events", "RUNNING")
    clock.advance(8)
    act(wb, wx, "clean_events", "FAILED",
        error="ValueError: event 88213 has no timestamp\n  at clean_events.py:42")
    clock.advance(25)
    wb.heartbeat(wb.get_workflow(wx).activity("clean_customers").activity_exec_id)
    clock.advance(4)
    return wx, thumbs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/img"))
    args = parser.parse_args(argv)
    for key, value in {"AWS_ACCESS_KEY_ID": "whimbrel", "AWS_SECRET_ACCESS_KEY": "whimbrel",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        os.environ.setdefault(key, value)
    clock = StepClock(time.time() - 4 * 3600)
    with dynamodb_local() as ddb, Whimbrel(endpoint_url=ddb.endpoint_url,
                                           table_prefix=fresh_table_prefix(),
                                           clock=clock, actor="worker") as wb:
        wb.create_tables()
        wx, fanout = showcase(wb, clock)
        with console(wb, refresh_seconds=3600) as con, chromium(1440, 900) as driver:
            driver.get(con.sign_in_url())
            shots = [
                shoot(driver, con.url("/runs"), args.out / "console_runs.png"),
                shoot(driver, con.url(f"/runs/{wx}"), args.out / "console_run.png",
                      height=1500),
                shoot(driver, con.url(f"/runs/{fanout}"), args.out / "console_fanout.png",
                      height=1240),
                shoot(driver, con.url("/definitions/nightly-etl"),
                      args.out / "console_definition.png"),
                shoot(driver, con.url(f"/actions/cancel?target={wx}"),
                      args.out / "console_confirm.png", height=640),
            ]
        assert TOKEN  # the screenshots show a signed-in browser
    for shot in shots:
        print(shot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
