"""A python activity the pool tests hold inside its code (issue 31): it counts how many
run at once and returns when the test opens its gate (bounded, never forever)."""

from __future__ import annotations

import threading
from typing import Any

from whimbrel import ActivityRun

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
