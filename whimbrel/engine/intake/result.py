"""What one stream record did (the handlers turn it into log lines and metrics)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    STARTED = "STARTED"
    APPLIED = "APPLIED"
    DUPLICATE = "DUPLICATE"
    IGNORED = "IGNORED"
    REJECTED = "REJECTED"
    #: A COMPLETED/FAILED for an attempt the system gave up on (TIMED_OUT, LOST): kept on
    #: its row as late output (docs/contract.md, "Late output"); its state is unchanged.
    LATE_OUTPUT = "LATE_OUTPUT"


@dataclass(frozen=True)
class IntakeResult:
    """What one record did; the handlers turn it into log lines and metrics."""

    outcome: Outcome
    workflow_exec_id: str | None = None
    activity_exec_id: str | None = None
    transition: str | None = None
    new_state: str | None = None
    reason: str | None = None
    #: True when another actor had moved the activity on (a TransitionConflict).
    conflict: bool = False
