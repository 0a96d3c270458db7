"""Activities of the large-payload tests (tests/integration/test_payloads.py)."""

from __future__ import annotations

import json
from typing import Any

from whimbrel import ActivityRun, WorkflowContext, workflow


def sized(run: ActivityRun) -> Any:
    """An output of ``input["size"]`` characters (a JSON string two bytes longer)."""
    return "y" * int(run.input["size"])


def measure(run: ActivityRun) -> Any:
    """What this attempt saw, by size: its input and each upstream's output."""
    return {"input": len(json.dumps(run.input)),
            "upstream": {k: len(json.dumps(v)) for k, v in run.upstream.items()}}


def element(run: ActivityRun) -> Any:
    """A map item: its element back, with its size (the map's list of outputs is as
    large as its input list)."""
    return {"n": len(run.input["pad"]), "i": run.input["i"], "pad": run.input["pad"]}


def tally(run: ActivityRun) -> Any:
    """What the map's output list held, summed."""
    outs = run.upstream["each"]
    return {"items": len(outs), "chars": sum(o["n"] for o in outs),
            "in_order": [o["i"] for o in outs] == list(range(len(outs)))}


@workflow("big_code_child")
def big_code_child(ctx: WorkflowContext, input: Any) -> Any:
    """A code workflow whose output (its return value) is kept in S3 under its own run."""
    return "z" * int(input["size"])
