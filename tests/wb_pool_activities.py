"""A python activity the pool tests hold inside its code (issue 31): it counts how many
run at once and returns when the test opens its gate (bounded, never forever)."""

from __future__ import annotations

import threading
from typing import Any

from whimbrel import ActivityRun, WorkflowContext, workflow

GATE = threading.Event()
_LOCK = threading.Lock()
NOW = [0]
MOST = [0]
STARTED: list[str] = []


def reset() -> None:
    GATE.clear()
    with _LOCK:
        NOW[0] = MOST[0] = 0
        STARTED.clear()


def gated(run: ActivityRun) -> Any:
    with _LOCK:
        NOW[0] += 1
        MOST[0] = max(MOST[0], NOW[0])
        STARTED.append(run.workflow_exec_id)
    try:
        GATE.wait(60)
    finally:
        with _LOCK:
            NOW[0] -= 1
    return {"ok": 1}


@workflow("keyed_steps")
def keyed_steps(ctx: WorkflowContext, input: Any) -> Any:
    """Issue 29: two external steps at once, in a pool keyed by the run's tenant."""
    handles = [ctx.start("job", {"i": i}, pool="steps", pool_key="input.tenant")
               for i in range(2)]
    return [h.result() for h in handles]
