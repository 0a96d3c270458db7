"""Code workflows: a Python function whose steps are activities, on the same contract
(DESIGN.md §5, "Code workflows on the same contract"). Pure: the engine's
``code_runs`` feature reads the rows, replays the function and writes what it decided.
"""

from whimbrel.contract.code.context import (
    Decision,
    Dispatch,
    NewStep,
    StepHandle,
    WorkflowContext,
    replay,
)
from whimbrel.contract.code.definition import (
    CodeDefinition,
    decode_step,
    encode_step,
    is_cleanup_step,
    split_step,
    step_name,
    step_patches,
)
from whimbrel.contract.code.errors import Cancelled, NonDeterminism, StepFailed, WaitTimedOut
from whimbrel.contract.code.history import History, RunFacts, StepState
from whimbrel.contract.code.workflow import CodeWorkflow, workflow

__all__ = [
    "Cancelled",
    "CodeDefinition",
    "CodeWorkflow",
    "Decision",
    "Dispatch",
    "History",
    "NewStep",
    "NonDeterminism",
    "RunFacts",
    "StepFailed",
    "StepHandle",
    "StepState",
    "WaitTimedOut",
    "WorkflowContext",
    "decode_step",
    "encode_step",
    "is_cleanup_step",
    "replay",
    "split_step",
    "step_name",
    "step_patches",
    "workflow",
]
