"""The full logic (Full Logic API): start, transition + follow-ups, cancel, sweep."""

from whimbrel.engine.engine import Engine
from whimbrel.engine.ports import Launcher, LaunchRequest
from whimbrel.engine.sweep import SweepReport, reconcile, sweep
from whimbrel.engine.views import ActivityExec, StateChange, WorkflowExec

__all__ = [
    "ActivityExec",
    "Engine",
    "LaunchRequest",
    "Launcher",
    "StateChange",
    "SweepReport",
    "WorkflowExec",
    "reconcile",
    "sweep",
]
