"""Activity functions the integration tests launch through the ``python`` launcher."""

from __future__ import annotations

import threading
import time
from typing import Any

from whimbrel import ActivityRun

#: Per-test scratch shared with the activities (keyed by workflow_exec_id).
EVENTS: list[tuple[str, str, str, float]] = []
_LOCK = threading.Lock()
FAIL_FIRST: set[str] = set()  # activity names that fail on attempt 1


def record(run: ActivityRun, what: str) -> None:
    with _LOCK:
        EVENTS.append((run.workflow_exec_id, run.activity_name, what, time.monotonic()))


def echo(run: ActivityRun) -> Any:
    record(run, "start")
    out = {"name": run.activity_name, "upstream": sorted(run.upstream)}
    record(run, "end")
    return out


def fail(run: ActivityRun) -> Any:
    record(run, "start")
    raise RuntimeError(f"{run.activity_name} failed on purpose")


def flaky(run: ActivityRun) -> Any:
    record(run, f"attempt-{run.attempt}")
    if run.attempt == 1:
        raise RuntimeError("first attempt fails")
    return {"attempt": run.attempt}


def wait_for_stop(run: ActivityRun) -> Any:
    """Heartbeats until cancelled (the heartbeat raises ActivityCancelled)."""
    record(run, "start")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run.heartbeat()
        run.stop_event.wait(0.05)
    raise RuntimeError("never cancelled")
