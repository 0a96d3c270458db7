"""Whimbrel: a serverless, decentralized workflow engine on DynamoDB."""

# The in-memory facade's stream runner (Whimbrel.in_memory(...).drain()): it lives in the
# local layer, above the facade, and registers itself on import.
import whimbrel.local.memory  # noqa: F401
from whimbrel.client.batch import BatchReport
from whimbrel.client.query import DefinitionVersion, WorkflowPage
from whimbrel.client.whimbrel import Whimbrel
from whimbrel.contract.code import (
    Cancelled,
    NonDeterminism,
    StepFailed,
    WaitTimedOut,
    WorkflowContext,
    workflow,
)
from whimbrel.contract.definitions import (
    ActivityDefinition,
    LauncherSpec,
    RetryPolicy,
    WorkflowDefinition,
)
from whimbrel.contract.errors import (
    ActivityCancelled,
    ActivityNotFound,
    ActivityTimedOut,
    DefinitionNotFound,
    IllegalTransition,
    InvalidDefinition,
    InvalidInput,
    ListenerOnly,
    NotAllowedNow,
    RequestIdReused,
    StateConflict,
    StoreError,
    UpstreamNotCompleted,
    WhimbrelError,
    WorkflowAlreadyEnded,
    WorkflowNotFound,
    WorkflowNotRunning,
)
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.contract.outcomes import MapProgress
from whimbrel.contract.pools import PoolInfo
from whimbrel.contract.schedule_info import ScheduleInfo
from whimbrel.contract.schedules import Schedule
from whimbrel.contract.states import ActivityState, Transition, WorkflowState
from whimbrel.contract.waits import NotAnApprover, SignalRefused
from whimbrel.engine import (
    ActivityExec,
    EngineDriven,
    NudgeReport,
    PoolNotFound,
    RedriveNotAllowed,
    RetryNotAllowed,
    ScheduleConflict,
    ScheduleNotFound,
    SweepReport,
    WorkflowExec,
    WorkflowRequest,
)
from whimbrel.worker.run import ActivityRun

__all__ = [
    "ActivityCancelled",
    "ActivityDefinition",
    "ActivityExec",
    "ActivityNotFound",
    "ActivityRun",
    "ActivityState",
    "ActivityTimedOut",
    "BatchReport",
    "Cancelled",
    "DefinitionNotFound",
    "DefinitionVersion",
    "EngineDriven",
    "IllegalTransition",
    "InvalidDefinition",
    "InvalidInput",
    "LauncherSpec",
    "ListenerOnly",
    "MapProgress",
    "NonDeterminism",
    "NotAllowedNow",
    "NotAnApprover",
    "NudgeReport",
    "PoolInfo",
    "PoolNotFound",
    "RedriveNotAllowed",
    "RequestIdReused",
    "RetryNotAllowed",
    "RetryPolicy",
    "Schedule",
    "ScheduleConflict",
    "ScheduleInfo",
    "ScheduleNotFound",
    "SignalRefused",
    "StateConflict",
    "StepFailed",
    "StoreError",
    "SweepReport",
    "Transition",
    "UpstreamNotCompleted",
    "WaitTimedOut",
    "Whimbrel",
    "WhimbrelError",
    "WorkflowContext",
    "WorkflowAlreadyEnded",
    "WorkflowDefinition",
    "WorkflowExec",
    "WorkflowNotFound",
    "WorkflowNotRunning",
    "WorkflowPage",
    "WorkflowRequest",
    "WorkflowState",
    "workflow",
    "workflow_exec_id_for",
]
