"""What a decision knows of a run: the latest attempt of each of its steps, by name and
by position (pure values; the engine builds them from the run's rows)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from whimbrel.contract.payloads import NO_BUCKET, PayloadLimits
from whimbrel.contract.states import ActivityState


@dataclass(frozen=True)
class RunFacts:
    """The run a decision replays: who it is and what it started with."""

    workflow_exec_id: str
    workflow_name: str
    input: Any
    #: When the run (last) went RUNNING: ``ctx.now()`` before any step's result.
    started_epoch: float
    #: How large a step's input, a child's input and the run's output may be: the
    #: store's (with a payload bucket, its maximum; larger values go to S3).
    limits: PayloadLimits = NO_BUCKET
    #: Seeds ``ctx.uuid4`` and ``ctx.random`` (None: the run's own id). A fork's is its
    #: source's, so its code computes the values the source's did (engine/fork_code.py).
    seed: str | None = None
    #: The run is CANCEL_REQUESTED: the replay raises ``Cancelled`` where the code waits
    #: (contract/code/cancel.py) and what its clean-up asks for is scheduled.
    cancelled: bool = False


@dataclass(frozen=True)
class StepState:
    """The latest attempt of one step, as its row says.

    ``final``: nothing more will happen to the step (COMPLETED, or ended another way
    with no retry to follow); the code gets its output or a ``StepFailed``.
    """

    name: str
    seq: int
    attempt: int
    state: ActivityState | None
    final: bool
    activity_exec_id: str
    output: str | None = None
    error: str | None = None
    error_type: str | None = None
    ended_epoch: float | None = None
    #: Ended unsuccessfully before the run's latest redrive: it runs again (a new
    #: attempt with a fresh retry budget) when the code asks for it.
    rerun: bool = False
    #: The ``ctx.patched`` ids recorded with it (passed just before it was scheduled).
    patches: tuple[str, ...] = ()
    #: A retry's time (REQUESTED until then; its timer moves it on).
    not_before: float | None = None
    #: Scheduled by the code's clean-up after a cancel (contract/code/cancel.py).
    cleanup: bool = False


@dataclass
class History:
    """A run's steps by name and by position. Terminal facts never change, so a copy
    kept in memory between decisions stays right for every final step; what is not
    final is read again before the code is told to wait for it."""

    steps: dict[str, StepState] = field(default_factory=dict)
    by_seq: dict[int, str] = field(default_factory=dict)
    #: The highest position recorded (0: none).
    last_seq: int = 0
    #: The highest position of a step from before a cancel (clean-up steps left out).
    main_seq: int = 0

    def put(self, step: StepState) -> None:
        known = self.steps.get(step.name)
        if known is not None and (known.attempt > step.attempt
                                  or (known.attempt == step.attempt and known.final)):
            return  # never replace a later or final picture with an older one
        self.steps[step.name] = step
        self.by_seq[step.seq] = step.name
        self.last_seq = max(self.last_seq, step.seq)
        if not step.cleanup:
            self.main_seq = max(self.main_seq, step.seq)

    def get(self, name: str) -> StepState | None:
        return self.steps.get(name)
