"""The engine's picture of stored items, as plain frozen values.

The engine reads and writes executions only as these records, through the store port it
owns (:class:`whimbrel.engine.ports.StorePort`); how they sit in DynamoDB is the store's
business. A record may be *partial* (a sparse-index hit carries only what the index
projects) or *stale* (the last image an actor saw): the engine writes against it, and the
write's condition on ``state`` decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from whimbrel.contract.states import ActivityState, WorkflowState


class _Remove:
    """Marker for "remove this attribute" in a change set."""

    _instance: _Remove | None = None

    def __new__(cls) -> _Remove:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "REMOVE"


#: In a change set (``{attribute: value}``), deletes the attribute.
REMOVE: Any = _Remove()

#: A change set: attribute names to new values (``REMOVE`` deletes one).
Changes = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Change:
    """One state change, kept on the item it happened to (no extra write)."""

    state: str
    at: float
    by: str | None = None


@dataclass(frozen=True, slots=True)
class ActivityRecord:
    """One attempt of one activity, as stored."""

    workflow_exec_id: str
    activity_exec_id: str
    activity_name: str
    workflow_name: str
    attempt: int
    state: ActivityState | None
    workflow_version: int | None = None
    created_epoch: float = 0.0
    updated_epoch: float = 0.0
    started_epoch: float | None = None
    ended_epoch: float | None = None
    heartbeat_epoch: float | None = None
    heartbeat_timeout_seconds: float | None = None
    #: Deadline of the whole attempt once RUNNING (``start_to_close_seconds``).
    close_epoch: float | None = None
    #: The real deadline of a RUNNING attempt (heartbeat or close), moved by every
    #: heartbeat; the ``timers`` entry is re-armed to it by the sweep only when it fires.
    deadline_epoch: float | None = None
    not_before_epoch: float | None = None
    #: Sparse ``timers`` index: present while a deadline is armed.
    timer_shard: str | None = None
    timer_epoch: float | None = None
    #: Sparse ``claimable`` index: present while an external attempt waits to be claimed.
    claim_shard: str | None = None
    claim_key: str | None = None
    output: str | None = None
    error: str | None = None
    error_type: str | None = None
    worker: str | None = None
    expires_epoch: float | None = None
    history: tuple[Change, ...] = ()
    #: The attempt's own input (JSON): a map item's element, a failure handler's error.
    input: str | None = None
    #: A map's number of items, set when it expands.
    map_size: int | None = None
    #: A failure handler's attempt: the failed attempt it was called for.
    called_by: str | None = None
    #: The workflow's redrive count when the attempt was created (absent: 0).
    redrive_count: int | None = None
    #: Attempts before this generation's first (a redrive starts a fresh retry budget).
    retry_base: int | None = None
    #: A wait's READY write says what it waits for (``signal:payment``, ``approval``...)
    #: and, for an approval that names them, who may decide.
    waiting_for: str | None = None
    approvers: tuple[str, ...] | None = None
    #: A deadline the sweep held back while the workflow was SUSPENDED (re-armed on resume).
    held_epoch: float | None = None
    #: An attempt of a redrive that adopts the child run of the attempt before it (which
    #: it redrives in place); absent, an attempt's child is derived from its own id.
    child_workflow_exec_id: str | None = None
    #: What the attempt reported after the system gave up on it (TIMED_OUT, LOST): its
    #: late COMPLETED's output (JSON text) or late FAILED's error, when that report was
    #: written (``late_epoch``: DynamoDB's time for a Simple API row); never a state.
    late_output: str | None = None
    late_error: str | None = None
    late_epoch: float | None = None
    #: Its retry's attempt, once that row was created (a retry row missing after this is
    #: lost, never created again: engine/lost.py).
    retry_created: int | None = None
    #: It completed with ``end_workflow``: its run ends COMPLETED with its output.
    ends_workflow: bool | None = None
    #: The run's W3C trace context (``traceparent``, a newline, ``tracestate`` when there
    #: is one), copied from the workflow item (engine/tracing.py).
    traceparent: str | None = None
    #: The pool slot it holds (``<pool>#<k>``; ``<pool>`` alone: admitted by a pool
    #: without slots), written by the move that admitted it (QUEUED/RUNNING, or READY
    #: and claimable for a pull one): engine/pools.py.
    pool_slot: str | None = None
    #: While it waits READY for its pool (full, or over its rate): the pool's name.
    pool_wait: str | None = None
    #: When it became READY (to be claimed, or to wait for its pool): its wait, which
    #: orders it among waiting attempts and ages it (contract/priority.py), counts from
    #: here. Absent on an attempt readied before it was kept: its run's creation.
    ready_epoch: float | None = None

    #: A code workflow's step: its position in the run and what the code asked it to be
    #: (contract/code/definition.py ``encode_step``), on each of its attempts.
    step: str | None = None
    #: The latest details a heartbeat carried (JSON text): the attempt's progress, read
    #: by the next attempt of the activity (``ActivityRun.previous_details``).
    heartbeat_details: str | None = None

    def with_changes(self, **changes: Any) -> ActivityRecord:
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class WorkflowRecord:
    """One workflow execution, as stored."""

    workflow_exec_id: str
    workflow_name: str
    version: int
    state: WorkflowState
    workflow_request_id: str = ""
    #: The run's input (JSON text), when it is on the run's item: an input larger than
    #: the store keeps inline is kept apart (``input_apart``) and read where it is needed
    #: (the engine's ``run_input``), so that a guard's read of the run stays small.
    input: str | None = None
    error: str | None = None
    source: str | None = None
    created_epoch: float = 0.0
    created_day: str = ""
    updated_epoch: float = 0.0
    ended_epoch: float | None = None
    #: Sparse ``reconcile`` index: the next visit of the reconciler (or the deadline).
    check_shard: str | None = None
    check_epoch: float | None = None
    #: When the Full Logic trace row of the request expires (set when it was written).
    request_expires_epoch: float | None = None
    expires_epoch: float | None = None
    history: tuple[Change, ...] = ()
    #: A child run: the parent's activity attempt that started it.
    parent_activity_exec_id: str | None = None
    #: How often the run was redriven, when it last was, and the redrive whose new
    #: attempts and edges are all written (engine/redrive.py).
    redrive_count: int | None = None
    redriven_epoch: float | None = None
    redrive_ready: int | None = None
    #: When the start had created every first attempt (roots included): a first attempt
    #: missing after this was lost, never created again (engine/lost.py).
    roots_ready: float | None = None
    #: A run an attempt ended early (``end_workflow``): that attempt, and its output (JSON).
    ended_by: str | None = None
    output: str | None = None
    #: The attempt whose ``end_workflow`` claimed the run's end (one per run, written
    #: before its COMPLETED: two at once have one winner; engine/conditions.py).
    ending_by: str | None = None
    #: Digest of the run's input as canonical JSON (contract/payloads.py): a start again
    #: under its request id is compared with it, however large the input (kept apart).
    input_digest: str | None = None
    #: The run's root span as W3C trace context (engine/tracing.py).
    traceparent: str | None = None
    #: True: the input is not on this item but kept apart (the store's
    #: ``workflow_input``); ``input`` is then None.
    input_apart: bool | None = None
    #: 0 (first) to 9, given at start (None: the default, 5): orders QUEUED runs, and
    #: shifts its attempts' priorities (contract/priority.py ``attempt_priority``).
    priority: int | None = None
    #: The run slot it holds (``run:<workflow_name>#<k>``) under ``max_running``.
    pool_slot: str | None = None
    #: A code run's ``ctx.properties`` (JSON), saved with each decision that changed it.
    properties: str | None = None
    #: A code run that ended with ``ctx.continue_as_new``: the run that took over.
    continued_as: str | None = None
    #: A fork (engine/fork.py): the run it was forked from. It starts as generation 1
    #: (``redrive_count``), which the view does not count as a redrive.
    forked_from: str | None = None
    #: The caller's attributes (JSON text of a mapping; contract/attributes.py).
    attributes: str | None = None
    #: A fork of a code run (engine/fork_code.py): the id that seeds its ``ctx.uuid4``
    #: and ``ctx.random`` (its source's seed) and the time its ``ctx.now()`` starts from
    #: (its source's), so that its code computes before the fork point what the
    #: source's did. None: the run's own id and start.
    code_seed: str | None = None
    code_epoch: float | None = None

    @property
    def redrives(self) -> int:
        """How often the run was redriven (0 when never)."""
        return self.redrive_count or 0

    @property
    def running_since(self) -> float:
        """When the run (last) went RUNNING: its start, or its latest redrive. Its
        ``timeout_seconds`` counts from here."""
        return self.redriven_epoch if self.redriven_epoch is not None else self.created_epoch


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One ``workflow_request`` row (Simple API start, or a Full Logic trace)."""

    workflow_request_id: str
    workflow_name: str
    when_epoch: float
    version: int | None = None
    input: str | None = None
    manual: bool = False
    source: str | None = None
    workflow_exec_id: str | None = None
    expires_epoch: float | None = None
    #: What processing did with a client's row (set by Whimbrel after the fact).
    outcome: str | None = None
    reason: str | None = None
    processed_epoch: float | None = None
    #: The caller's W3C trace context, continued by the run (engine/tracing.py).
    traceparent: str | None = None
    #: The run's priority (0-9; None: the default).
    priority: int | None = None
    #: The run's attributes (JSON text; contract/attributes.py).
    attributes: str | None = None


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One ``activity_event`` row (Simple API report)."""

    activity_event_id: str
    activity_exec_id: str
    transition: str
    when_epoch: float
    activity_name: str | None = None
    workflow_exec_id: str | None = None
    workflow_name: str | None = None
    output: str | None = None
    error: str | None = None
    source: str | None = None
    #: The reporter's W3C trace context (engine/tracing.py).
    traceparent: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DefinitionRecord:
    workflow_name: str
    version: int
    definition: str
    created_epoch: float
    description: str | None = None


@dataclass(frozen=True, slots=True)
class RejectionRecord:
    rejection_day: str
    rejection_id: str
    source: str
    reason: str
    error_type: str
    record: str
    when_epoch: float
    expires_epoch: float | None = None


@dataclass(frozen=True, slots=True)
class SignalRecord:
    """A signal kept for a run until a wait of its name receives it (``signal`` table)."""

    workflow_exec_id: str
    signal_id: str
    signal_name: str
    sent_epoch: float
    payload: str | None = None
    #: The attempt it was given to (set by the one conditional write that binds it).
    consumed_by: str | None = None
    expires_epoch: float | None = None


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """A lease on a share of the work (``lease`` table): who holds it, since when and
    until when unless renewed. ``owner`` is unique per holder (host, pid and a random
    part); ``host`` and ``pid`` say where it runs, for the person told it is taken."""

    lease_id: str
    owner: str
    until_epoch: float
    acquired_epoch: float
    host: str | None = None
    pid: int | None = None
    #: What the holder serves (dev: its DynamoDB endpoint), for the same person.
    endpoint: str | None = None


@dataclass(frozen=True, slots=True)
class Due:
    """An armed deadline the sweep found in the sparse ``timers`` index."""

    workflow_exec_id: str
    activity_exec_id: str


def latest_of(items: Sequence[ActivityRecord]) -> dict[str, ActivityRecord]:
    """The newest attempt of each activity, by name."""
    latest: dict[str, ActivityRecord] = {}
    for act in items:
        cur = latest.get(act.activity_name)
        if cur is None or act.attempt > cur.attempt:
            latest[act.activity_name] = act
    return latest


def day_of(epoch: float) -> str:
    """The UTC day of ``epoch`` (``YYYY-MM-DD``), as the listing and rejection keys write it."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")
