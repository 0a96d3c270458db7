"""The two state machines of the Whimbrel contract, as data.

Every state and every allowed move lives here exactly once. Stores and engines read
these tables through :func:`next_activity_state` / :func:`next_workflow_state`; nothing
else in the code base spells a state as a bare string.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from whimbrel.contract.errors import IllegalTransition, InvalidInput


class ActivityState(StrEnum):
    """State of one activity execution (one attempt of one activity)."""

    REQUESTED = "REQUESTED"
    READY = "READY"
    QUEUED = "QUEUED"
    PREPARING = "PREPARING"
    RUNNING = "RUNNING"
    CANCELLED = "CANCELLED"
    CANCELLED_RUNNING = "CANCELLED_RUNNING"
    TIMED_OUT = "TIMED_OUT"
    FAILED = "FAILED"
    COMPLETED = "COMPLETED"
    #: The attempt's row vanished while its run was live (a raw DeleteItem, a bad
    #: restore). Written only by the reconciler, as a tombstone: it creates the missing
    #: row in this state, so the attempt id can never be created (or handed out) again
    #: (docs/contract.md, "LOST"). No move leads here and none leaves.
    LOST = "LOST"
    #: Never ran, and needs not: its ``when`` was false, an upstream was SKIPPED, or its
    #: run ended early (issue 22). Counts as resolved: its dependents are decided in turn.
    SKIPPED = "SKIPPED"

    @property
    def is_terminal(self) -> bool:
        return self in ACTIVITY_TERMINAL

    @property
    def is_active(self) -> bool:
        """True while something may be executing the activity's code."""
        return self in (ActivityState.RUNNING, ActivityState.CANCELLED_RUNNING)


class Transition(StrEnum):
    """The verbs of the activity contract."""

    CANCEL = "CANCEL"
    READY = "READY"
    QUEUED = "QUEUED"
    PREPARING = "PREPARING"
    RUNNING = "RUNNING"
    FAILED = "FAILED"
    COMPLETED = "COMPLETED"
    TIME_OUT = "TIME_OUT"
    #: The engine's alone (like TIME_OUT is the listener's): an attempt not started ends
    #: SKIPPED (a false ``when``, a SKIPPED upstream, a run ended early).
    SKIP = "SKIP"

    @classmethod
    def _missing_(cls, value: object) -> Transition:
        # An unknown verb from a caller is bad input: raise it inside the error tree
        # (InvalidInput is also a ValueError, what Enum lookups raise), naming the field
        # and the known verbs, not a bare ValueError (test_bad_input_corpus).
        known = ", ".join(t.value for t in cls)
        raise InvalidInput(f"unknown transition {value!r} (known: {known})", field="transition")


class WorkflowState(StrEnum):
    """State of one workflow execution."""

    REQUESTED = "REQUESTED"
    RUNNING = "RUNNING"
    FAILED_WAITING = "FAILED_WAITING"
    CANCEL_REQUESTED = "CANCEL_REQUESTED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    #: The workflow's own deadline (``WorkflowDefinition.timeout_seconds``) passed.
    TIMED_OUT = "TIMED_OUT"
    #: Paused by an operator: nothing new starts until RESUME; what runs runs on.
    SUSPENDED = "SUSPENDED"
    #: Accepted, waiting for a run slot of its definition (``max_running``, issue 22):
    #: nothing of it exists but its item until it STARTs (engine/pools.py).
    QUEUED = "QUEUED"

    @property
    def is_terminal(self) -> bool:
        return self in WORKFLOW_TERMINAL


class WorkflowTransition(StrEnum):
    """Moves of a workflow execution; made only by the engine."""

    START = "START"
    COMPLETE = "COMPLETE"
    FAIL = "FAIL"
    CANCEL = "CANCEL"
    STOPPED = "STOPPED"
    TIME_OUT = "TIME_OUT"
    #: An ended run (FAILED, CANCELLED, TIMED_OUT) runs again from where it broke.
    REDRIVE = "REDRIVE"
    SUSPEND = "SUSPEND"
    RESUME = "RESUME"
    #: A start of a definition whose ``max_running`` runs are all RUNNING: it waits.
    QUEUE = "QUEUE"


A, T, W, WT = ActivityState, Transition, WorkflowState, WorkflowTransition

ACTIVITY_TRANSITIONS: Mapping[tuple[ActivityState, Transition], ActivityState] = MappingProxyType(
    {
        (A.REQUESTED, T.CANCEL): A.CANCELLED,
        (A.REQUESTED, T.READY): A.READY,
        (A.REQUESTED, T.QUEUED): A.QUEUED,
        (A.READY, T.CANCEL): A.CANCELLED,
        (A.READY, T.QUEUED): A.QUEUED,
        (A.READY, T.PREPARING): A.PREPARING,
        (A.READY, T.RUNNING): A.RUNNING,
        (A.QUEUED, T.CANCEL): A.CANCELLED,
        (A.QUEUED, T.PREPARING): A.PREPARING,
        (A.QUEUED, T.RUNNING): A.RUNNING,
        (A.QUEUED, T.FAILED): A.FAILED,
        (A.PREPARING, T.CANCEL): A.CANCELLED,
        (A.PREPARING, T.RUNNING): A.RUNNING,
        (A.PREPARING, T.FAILED): A.FAILED,
        # Whimbrel's extension (docs/contract.md, "Deadlines"): an attempt nobody started
        # within its schedule-to-start time (a READY external nobody claimed, a QUEUED
        # launch that never ran) is timed out by the heartbeat listener, like a silent
        # running one, and its retry policy follows.
        (A.READY, T.TIME_OUT): A.TIMED_OUT,
        (A.QUEUED, T.TIME_OUT): A.TIMED_OUT,
        (A.PREPARING, T.TIME_OUT): A.TIMED_OUT,
        (A.RUNNING, T.CANCEL): A.CANCELLED_RUNNING,
        (A.RUNNING, T.FAILED): A.FAILED,
        (A.RUNNING, T.COMPLETED): A.COMPLETED,
        (A.RUNNING, T.TIME_OUT): A.TIMED_OUT,
        # Our reading of the open CANCELLED_RUNNING row (docs/contract.md): the
        # activity was asked to stop; whatever it reports next ends it as CANCELLED,
        # and silence ends it as TIMED_OUT.
        (A.CANCELLED_RUNNING, T.FAILED): A.CANCELLED,
        (A.CANCELLED_RUNNING, T.COMPLETED): A.CANCELLED,
        (A.CANCELLED_RUNNING, T.TIME_OUT): A.TIMED_OUT,
        # Conditions (docs/contract.md, "Skipped activities"): only the engine skips, and
        # only an attempt nobody launched yet.
        (A.REQUESTED, T.SKIP): A.SKIPPED,
        (A.READY, T.SKIP): A.SKIPPED,
    }
)

#: States no move leads to: a row is only ever *created* in them (LOST, the reconciler's
#: tombstone of a missing attempt row). Terminal, and answered by the retry policy.
ACTIVITY_TOMBSTONES: frozenset[ActivityState] = frozenset({A.LOST})

ACTIVITY_TERMINAL: frozenset[ActivityState] = frozenset(
    {A.CANCELLED, A.TIMED_OUT, A.FAILED, A.COMPLETED, A.SKIPPED}
) | ACTIVITY_TOMBSTONES

WORKFLOW_TRANSITIONS: Mapping[tuple[WorkflowState, WorkflowTransition], WorkflowState] = (
    MappingProxyType(
        {
            (W.REQUESTED, WT.START): W.RUNNING,
            (W.REQUESTED, WT.CANCEL): W.CANCEL_REQUESTED,
            (W.REQUESTED, WT.FAIL): W.FAILED_WAITING,
            (W.RUNNING, WT.COMPLETE): W.COMPLETED,
            (W.RUNNING, WT.FAIL): W.FAILED_WAITING,
            (W.RUNNING, WT.CANCEL): W.CANCEL_REQUESTED,
            (W.FAILED_WAITING, WT.STOPPED): W.FAILED,
            (W.FAILED_WAITING, WT.CANCEL): W.CANCEL_REQUESTED,
            (W.CANCEL_REQUESTED, WT.STOPPED): W.CANCELLED,
            # The workflow's deadline is hard, as in Step Functions and Temporal: the run
            # ends at once; what still runs is asked to stop (docs/contract.md).
            (W.REQUESTED, WT.TIME_OUT): W.TIMED_OUT,
            (W.RUNNING, WT.TIME_OUT): W.TIMED_OUT,
            (W.FAILED_WAITING, WT.TIME_OUT): W.TIMED_OUT,
            (W.CANCEL_REQUESTED, WT.TIME_OUT): W.TIMED_OUT,
            # An operator's redrive (docs/contract.md): what did not complete gets a new
            # attempt; what completed is kept.
            (W.FAILED, WT.REDRIVE): W.RUNNING,
            (W.CANCELLED, WT.REDRIVE): W.RUNNING,
            (W.TIMED_OUT, WT.REDRIVE): W.RUNNING,
            # Suspend and resume (docs/contract.md, "Waits and suspension"): a suspended
            # run still fails, is cancelled or times out like a running one.
            (W.RUNNING, WT.SUSPEND): W.SUSPENDED,
            (W.SUSPENDED, WT.RESUME): W.RUNNING,
            (W.SUSPENDED, WT.CANCEL): W.CANCEL_REQUESTED,
            (W.SUSPENDED, WT.FAIL): W.FAILED_WAITING,
            (W.SUSPENDED, WT.TIME_OUT): W.TIMED_OUT,
            # max_running (docs/contract.md, "Queued runs"): a start beyond the limit is
            # accepted and waits QUEUED; the engine that frees a run slot (any end of a
            # run) or a reconcile visit STARTs it; a cancel or its deadline ends it
            # without it ever running.
            (W.REQUESTED, WT.QUEUE): W.QUEUED,
            (W.QUEUED, WT.START): W.RUNNING,
            (W.QUEUED, WT.CANCEL): W.CANCEL_REQUESTED,
            (W.QUEUED, WT.TIME_OUT): W.TIMED_OUT,
        }
    )
)

WORKFLOW_TERMINAL: frozenset[WorkflowState] = frozenset(
    {W.COMPLETED, W.FAILED, W.CANCELLED, W.TIMED_OUT})

del A, T, W, WT


# -- sets derived from the tables (nothing below spells a state by hand) -----------------

def activity_sources(transition: Transition,
                     leading_to: ActivityState | None = None) -> frozenset[ActivityState]:
    """States from which ``transition`` is allowed (and leads to ``leading_to``, if given)."""
    return frozenset(s for (s, t), n in ACTIVITY_TRANSITIONS.items()
                     if t is transition and (leading_to is None or n is leading_to))


def workflow_sources(transition: WorkflowTransition) -> frozenset[WorkflowState]:
    """Workflow states from which ``transition`` is allowed."""
    return frozenset(s for (s, t) in WORKFLOW_TRANSITIONS if t is transition)


#: Not started yet: a CANCEL simply ends them (REQUESTED, READY, QUEUED, PREPARING).
ACTIVITY_PENDING: frozenset[ActivityState] = activity_sources(
    Transition.CANCEL, ActivityState.CANCELLED)
#: Its code may be executing: it reports COMPLETED or FAILED (RUNNING, CANCELLED_RUNNING).
ACTIVITY_ACTIVE: frozenset[ActivityState] = activity_sources(Transition.COMPLETED)
#: Launched, not yet running (QUEUED, PREPARING): launched before a suspend, they may
#: still report RUNNING while the run is SUSPENDED.
ACTIVITY_LAUNCHED: frozenset[ActivityState] = frozenset(
    n for (s, t), n in ACTIVITY_TRANSITIONS.items()
    if t in (Transition.QUEUED, Transition.PREPARING))
#: Not launched (REQUESTED, READY): their deadlines are held while the run is SUSPENDED.
ACTIVITY_NOT_LAUNCHED: frozenset[ActivityState] = ACTIVITY_PENDING - ACTIVITY_LAUNCHED
#: Where an attempt goes once its upstreams resolved (READY, QUEUED): the moves the
#: upstream guard checks.
ACTIVITY_RELEASED: frozenset[ActivityState] = frozenset(
    n for (s, t), n in ACTIVITY_TRANSITIONS.items()
    if s is ActivityState.REQUESTED and t not in (Transition.CANCEL, Transition.SKIP))
#: The end of an attempt that never needed to run (SKIPPED): resolved, like COMPLETED.
ACTIVITY_SKIPPED: frozenset[ActivityState] = frozenset(
    n for (s, t), n in ACTIVITY_TRANSITIONS.items() if t is Transition.SKIP)
#: The ends of an attempt that failed, went silent or was lost, which its retry policy
#: answers (FAILED, TIMED_OUT, LOST): every end of RUNNING but COMPLETED, and the
#: tombstones.
ACTIVITY_FAILED: frozenset[ActivityState] = frozenset(
    n for (s, t), n in ACTIVITY_TRANSITIONS.items()
    if s is ActivityState.RUNNING and n.is_terminal and t is not Transition.COMPLETED
) | ACTIVITY_TOMBSTONES
#: Every end but COMPLETED and SKIPPED (FAILED, TIMED_OUT, CANCELLED, LOST).
ACTIVITY_UNSUCCESSFUL: frozenset[ActivityState] = ACTIVITY_TERMINAL - {
    ACTIVITY_TRANSITIONS[(ActivityState.RUNNING, Transition.COMPLETED)]} - ACTIVITY_SKIPPED
#: What tells a running attempt's process to stop (CANCELLED_RUNNING, CANCELLED,
#: TIMED_OUT, LOST): where others' moves (and the reconciler's tombstone) take an active
#: attempt — all but its own reports.
ACTIVITY_STOPPING: frozenset[ActivityState] = (frozenset(
    n for (s, t), n in ACTIVITY_TRANSITIONS.items() if s in ACTIVITY_ACTIVE) - {
    ACTIVITY_TRANSITIONS[(ActivityState.RUNNING, t)]
    for t in (Transition.COMPLETED, Transition.FAILED)}) | ACTIVITY_TOMBSTONES
#: Where the system gave up on an attempt that may still be running (TIMED_OUT, LOST):
#: its own late COMPLETED or FAILED is kept on its row (``late_output``/``late_error``)
#: and never changes its state (docs/contract.md, "Late output").
ACTIVITY_GAVE_UP: frozenset[ActivityState] = frozenset(
    n for (s, t), n in ACTIVITY_TRANSITIONS.items()
    if s in ACTIVITY_ACTIVE and t is Transition.TIME_OUT) | ACTIVITY_TOMBSTONES
#: Whoever makes one of these moves starts the activity (QUEUED, PREPARING, RUNNING).
ACTIVITY_STARTING: frozenset[ActivityState] = frozenset(
    n for (s, t), n in ACTIVITY_TRANSITIONS.items()
    if t in (Transition.QUEUED, Transition.PREPARING, Transition.RUNNING))
#: A failing or cancelled workflow waits in these until nothing runs (then STOPPED).
WORKFLOW_SETTLING: frozenset[WorkflowState] = workflow_sources(WorkflowTransition.STOPPED)
#: Live and not ending: an activity's end is followed up (dependents readied, retries
#: created), as opposed to settled (REQUESTED, RUNNING, SUSPENDED).
WORKFLOW_PROCEEDING: frozenset[WorkflowState] = workflow_sources(WorkflowTransition.FAIL)
#: Ended runs that can run again (FAILED, CANCELLED, TIMED_OUT).
WORKFLOW_REDRIVABLE: frozenset[WorkflowState] = workflow_sources(WorkflowTransition.REDRIVE)
#: Runs whose READY pull attempts follow the run's state in or out of the claimable index
#: (RUNNING, SUSPENDED): those a SUSPEND or RESUME starts from.
WORKFLOW_PAUSABLE: frozenset[WorkflowState] = workflow_sources(
    WorkflowTransition.SUSPEND) | workflow_sources(WorkflowTransition.RESUME)
#: Waiting for a run slot (QUEUED): where a QUEUE leads.
WORKFLOW_WAITING: frozenset[WorkflowState] = frozenset(
    n for (s, t), n in WORKFLOW_TRANSITIONS.items() if t is WorkflowTransition.QUEUE)
#: Not terminal.
WORKFLOW_LIVE: frozenset[WorkflowState] = frozenset(
    s for s in WorkflowState if s not in WORKFLOW_TERMINAL)


def activity_path(current: ActivityState, *transitions: Transition,
                  activity_exec_id: str | None = None) -> tuple[ActivityState, ...]:
    """The states ``transitions`` lead through from ``current``, in order.

    One actor may make several consecutive moves that nobody else can make in between
    in one conditional write (docs/contract.md, "Moves made in one write"); every step
    is checked against the table.

    Raises:
        IllegalTransition: a step the contract does not allow.
    """
    path: list[ActivityState] = []
    state = current
    for t in transitions:
        state = next_activity_state(state, t, activity_exec_id=activity_exec_id)
        path.append(state)
    return tuple(path)


def next_activity_state(
    current: ActivityState, transition: Transition, *, activity_exec_id: str | None = None
) -> ActivityState:
    """Return the state ``transition`` leads to from ``current``.

    Raises:
        IllegalTransition: the contract has no such move.
    """
    try:
        return ACTIVITY_TRANSITIONS[(current, transition)]
    except KeyError:
        raise IllegalTransition(
            current=current.value,
            transition=transition.value,
            activity_exec_id=activity_exec_id,
        ) from None


def next_workflow_state(
    current: WorkflowState, transition: WorkflowTransition, *, workflow_exec_id: str | None = None
) -> WorkflowState:
    """Return the workflow state ``transition`` leads to from ``current``.

    Raises:
        IllegalTransition: the workflow contract has no such move.
    """
    try:
        return WORKFLOW_TRANSITIONS[(current, transition)]
    except KeyError:
        raise IllegalTransition(
            current=current.value,
            transition=transition.value,
            workflow_exec_id=workflow_exec_id,
        ) from None


def allowed_transitions(current: ActivityState) -> tuple[Transition, ...]:
    """The verbs the contract allows from ``current`` (empty for terminal states)."""
    return tuple(t for (s, t) in ACTIVITY_TRANSITIONS if s is current)
