"""The full logic (Full Logic API): start, transition + follow-ups, cancel, sweep.

This is the engine's public face: code outside ``whimbrel/engine`` (the client, the
worker, the local runtime, the CLI, the console, the Lambda handlers, launchers,
observers) imports from here only (tests/unit/test_engine_shape.py checks). An
:class:`Engine` is reached through its parts (``engine.starting.start(…)``,
``engine.moves.transition(…)``, ``engine.reads.get_workflow(…)``) and a feature's own
operations through ``engine.feature(X).op(…)`` with ``X`` one of the feature classes
below.
"""

from whimbrel.engine import tracing
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.engine.conditions import Conditions
from whimbrel.engine.engine import (
    FEATURES,
    IN_FLIGHT_GRACE_SECONDS,
    RECONCILE_GRACE_SECONDS,
    Engine,
)
from whimbrel.engine.fork import fork
from whimbrel.engine.heartbeats import HEARTBEAT_WRITE_SHARE, Pace
from whimbrel.engine.intake import (
    SOURCE_DEAD_LETTER,
    Intake,
    IntakeResult,
    Outcome,
    record_keys,
    record_rejection,
)
from whimbrel.engine.intake.decode import ddb_part
from whimbrel.engine.leases import lease_owner
from whimbrel.engine.manual import RetryNotAllowed, retry_activity
from whimbrel.engine.metrics import EngineMetrics
from whimbrel.engine.moves import EngineDriven
from whimbrel.engine.nudge import NudgeReport, nudge
from whimbrel.engine.payloads import resolved
from whimbrel.engine.pool_ledger import PoolNotFound
from whimbrel.engine.pools import Pools
from whimbrel.engine.ports import Clock, Launcher, LaunchRequest, StorePort
from whimbrel.engine.redrive import Redrive, RedriveNotAllowed
from whimbrel.engine.rules import failed_for_good
from whimbrel.engine.schedules import ScheduleConflict, ScheduleNotFound, Schedules
from whimbrel.engine.suspend import Suspend
from whimbrel.engine.sweep import SweepReport, reconcile, sweep
from whimbrel.engine.views import ActivityExec, StateChange, WorkflowExec, WorkflowRequest
from whimbrel.engine.waits import Waits

__all__ = [
    "FEATURES",
    "HEARTBEAT_WRITE_SHARE",
    "IN_FLIGHT_GRACE_SECONDS",
    "RECONCILE_GRACE_SECONDS",
    "SOURCE_DEAD_LETTER",
    "ActivityExec",
    "Clock",
    "CodeRuns",
    "Conditions",
    "Engine",
    "EngineDriven",
    "EngineMetrics",
    "Intake",
    "IntakeResult",
    "LaunchRequest",
    "Launcher",
    "NudgeReport",
    "Outcome",
    "Pace",
    "PoolNotFound",
    "Pools",
    "Redrive",
    "RedriveNotAllowed",
    "RetryNotAllowed",
    "ScheduleConflict",
    "ScheduleNotFound",
    "Schedules",
    "StateChange",
    "StorePort",
    "Suspend",
    "SweepReport",
    "Waits",
    "WorkflowExec",
    "WorkflowRequest",
    "ddb_part",
    "failed_for_good",
    "fork",
    "lease_owner",
    "nudge",
    "reconcile",
    "record_keys",
    "record_rejection",
    "resolved",
    "retry_activity",
    "sweep",
    "tracing",
]
