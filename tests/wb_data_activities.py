"""Activity functions of the data-driven tests (maps, handlers, child workflows)."""

from __future__ import annotations

import threading
from typing import Any

from whimbrel import ActivityRun

_LOCK = threading.Lock()
#: Elements whose item fails, for ``flaky_item`` (any attempt) and ``fail_once`` (first).
FAILING: set[Any] = set()
#: (workflow_exec_id, activity_name, attempt) of every run of ``counted``.
RUNS: list[tuple[str, str, int]] = []


def listing(run: ActivityRun) -> Any:
    """An S3-style listing: ``{"keys": [...]}`` of ``input["n"]`` keys."""
    n = run.input.get("n", 3) if isinstance(run.input, dict) else 3
    return {"bucket": "photos", "keys": [f"img/{i:04d}.jpg" for i in range(n)]}


def numbers(run: ActivityRun) -> Any:
    n = run.input.get("n", 3) if isinstance(run.input, dict) else 3
    return list(range(n))


def item(run: ActivityRun) -> Any:
    """What an item sees: its element, its index and its upstream outputs."""
    with _LOCK:
        RUNS.append((run.workflow_exec_id, run.activity_name, run.attempt))
    return {"index": run.item_index, "element": run.input}


def noop(run: ActivityRun) -> Any:
    return None


def flaky_item(run: ActivityRun) -> Any:
    with _LOCK:
        RUNS.append((run.workflow_exec_id, run.activity_name, run.attempt))
    value = run.input.get("fail") if isinstance(run.input, dict) else run.input
    if isinstance(value, str | int) and value in FAILING:
        raise ValueError(f"element {run.input!r} is bad")
    return {"index": run.item_index, "element": run.input}


def refuse(run: ActivityRun) -> Any:
    raise PermissionError("the card was declined")


def summary(run: ActivityRun) -> Any:
    """Reports what it saw of its upstreams (outputs, errors)."""
    return {"upstream": run.upstream, "errors": run.upstream_errors, "input": run.input}


def handler(run: ActivityRun) -> Any:
    """A failure handler: echoes the failure it handles."""
    return {"handled": run.input["activity"], "error_type": run.input["error_type"],
            "refunded": True}


def child_sink(run: ActivityRun) -> Any:
    return {"child_input": run.input, "upstream": run.upstream}


def indices(run: ActivityRun) -> Any:
    """The item indices its (map) upstream's outputs carry, in order."""
    (outputs,) = run.upstream.values()
    return [o["index"] for o in outputs]
