"""Activity functions of the condition tests (issue 22: when, input_from, end_workflow)."""

from __future__ import annotations

from typing import Any

from whimbrel import ActivityRun


def charge(run: ActivityRun) -> Any:
    """Declines when the run's input says so."""
    return {"id": "ch_1", "status": run.input.get("status", "ok")}


def echo(run: ActivityRun) -> Any:
    """What it was given: its input and its upstreams' outputs."""
    return {"input": run.input, "upstream": run.upstream}


def finish_now(run: ActivityRun) -> Any:
    """Ends its run early with an answer."""
    run.end_workflow({"answer": 42, "from": run.activity_name})
    return {"ignored": True}  # recorded nowhere: the attempt completed already
