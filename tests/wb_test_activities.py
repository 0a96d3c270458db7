"""Activity functions the integration tests launch through the ``python`` launcher."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from whimbrel import ActivityRun
from whimbrel.contract.errors import ActivityTimedOut

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


# -- redelivery and soak (tests/e2e/test_redelivery.py, tests/e2e/test_soak.py) ---------

#: Runs of the functions below, by activity_exec_id: each attempt must run once.
RUNS: Counter[str] = Counter()
#: Called with the workflow_exec_id when a ``soak`` activity starts blocking (the soak
#: test cancels that workflow a little later).
ON_BLOCK: list[Callable[[str], None]] = []
#: Longest a ``block`` or ``silent`` soak activity waits before giving up.
SOAK_WAIT_LIMIT = [120.0]


def _count_run(run: ActivityRun) -> None:
    with _LOCK:
        RUNS[run.activity_exec_id] += 1


def scripted(run: ActivityRun) -> Any:
    """Fails while ``attempt <= input["fail_attempts"]`` (default 0); counts each run."""
    _count_run(run)
    record(run, f"run-{run.attempt}")
    fail_attempts = run.input.get("fail_attempts", 0) if isinstance(run.input, dict) else 0
    if run.attempt <= fail_attempts:
        raise RuntimeError(f"{run.activity_name} attempt {run.attempt} fails on purpose")
    return {"name": run.activity_name, "attempt": run.attempt,
            "upstream": sorted(run.upstream)}


def soak(run: ActivityRun) -> Any:
    """Does what ``input["plan"][activity_name][attempt - 1]`` says (default ``ok``):

    * ``ok``: returns ``{"name", "attempt", "upstream"}``;
    * ``fail``: raises;
    * ``silent``: stops heartbeating, as a hung process would, and waits until the
      heartbeat listener has timed it out; its late report is then refused;
    * ``block``: waits until the workflow is cancelled (the background heartbeat learns
      it) after telling ``ON_BLOCK``.
    """
    _count_run(run)
    plan = run.input.get("plan", {}) if isinstance(run.input, dict) else {}
    steps = plan.get(run.activity_name) or []
    what = steps[run.attempt - 1] if run.attempt <= len(steps) else "ok"
    if what == "fail":
        raise RuntimeError(f"{run.activity_name} attempt {run.attempt} fails on purpose")
    if what == "silent":
        # The background heartbeat stops at its next tick once a stop is noted.
        run._note_stop(ActivityTimedOut(run.activity_exec_id))
        store = run._engine.store
        pace = threading.Event()
        deadline = time.monotonic() + SOAK_WAIT_LIMIT[0]
        while time.monotonic() < deadline:
            item = store.get_activity(run.activity_exec_id)
            if item is not None and item.state == "TIMED_OUT":
                break
            pace.wait(0.25)
        run.check()  # raises ActivityTimedOut: the worker's report is ignored
    if what == "block":
        for hook in list(ON_BLOCK):
            hook(run.workflow_exec_id)
        if not run.stop_event.wait(SOAK_WAIT_LIMIT[0]):
            raise RuntimeError(f"{run.activity_exec_id} was never cancelled")
        return {"stopped": True}
    return {"name": run.activity_name, "attempt": run.attempt,
            "upstream": sorted(run.upstream)}


def scripted_list(run: ActivityRun) -> Any:
    """Like ``scripted`` (counted once per run), returning a list to map over."""
    _count_run(run)
    return ["x", "y", "z"]


def traced(run: ActivityRun) -> Any:
    """Opens a span of its own (it joins the run's trace) and reports the context an
    external process would continue."""
    from opentelemetry import trace

    with trace.get_tracer("wb-test-activity").start_as_current_span("own work"):
        pass
    return {"trace_context": run.trace_context}


# -- a process's capacity (tests/integration/test_worker_capacity.py) -------------------

#: Opened by the test to let every ``gated`` activity end.
GATE = threading.Event()
#: ``gated`` activities running now, and the most that ever ran at once.
GATED = {"now": 0, "most": 0}


def gated(run: ActivityRun) -> Any:
    """Runs until ``GATE`` opens (counted while it runs; each attempt once)."""
    _count_run(run)
    with _LOCK:
        GATED["now"] += 1
        GATED["most"] = max(GATED["most"], GATED["now"])
    try:
        if not GATE.wait(60):
            raise RuntimeError("the gate never opened")
    finally:
        with _LOCK:
            GATED["now"] -= 1
    return {"name": run.activity_name}
