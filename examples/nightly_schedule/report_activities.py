"""Activity code of the nightly report (python launcher)."""

from __future__ import annotations

from typing import Any

from whimbrel import ActivityRun


def build(run: ActivityRun) -> dict[str, Any]:
    kind = (run.input or {}).get("kind", "daily")
    return {"report": kind, "run": run.workflow_exec_id}
