"""The moves callers ask for (part of the core): a contract move with its guards, an
attempt's own RUNNING, end and heartbeat, claims, and the one-write end of a wait by
whoever makes its event happen (a timer's sweep, a signal's sender, an approver).

Every state change is one conditional write through the store port, then its
follow-ups (``flow.py``).
"""

from __future__ import annotations

import random
from concurrent.futures import Future
from typing import Any

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import (
    ActivityCancelled,
    ActivityTimedOut,
    ListenerOnly,
    NotAllowedNow,
    StateConflict,
    UpstreamNotCompleted,
    WorkflowNotRunning,
)
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.limits import MAX_OUTPUT_BYTES
from whimbrel.contract.outcomes import resolution
from whimbrel.contract.payloads import encode_payload
from whimbrel.contract.priority import serving_grain
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import (
    ACTIVITY_ACTIVE,
    ACTIVITY_GAVE_UP,
    ACTIVITY_RELEASED,
    ACTIVITY_STARTING,
    ACTIVITY_TRANSITIONS,
    WORKFLOW_PROCEEDING,
    ActivityState,
    Transition,
    activity_path,
    next_activity_state,
)
from whimbrel.engine import flow, late, rules, written
from whimbrel.engine.feature import Core
from whimbrel.engine.views import ActivityExec

A = ActivityState

#: Claim candidates asked of each shard of the claimable index.
CLAIM_CANDIDATES = 25
#: Shards of the claimable index a claim reads first: a window of consecutive shards at
#: a random offset, so workers polling together mostly read (and race on) different
#: shards; only when the window holds nothing are the other shards read.
CLAIM_WINDOW = 4
#: Candidates whose serving order is this close are equals to a claim, tried in a random
#: order (far finer than a priority level, AGING_SECONDS = 300 s of waiting; the
#: serving order is kept to the second, as the aging rule promises).
CLAIM_ORDER_GRAIN_SECONDS = 1.0


class EngineDriven(NotAllowedNow):
    """A move asked for an attempt only the engine moves: a map's own row (its items
    decide its end) or an attempt that runs a child workflow (the child decides)."""

    def __init__(self, *, activity_exec_id: str, transition: str, what: str) -> None:
        super().__init__(
            f"{transition} refused for {activity_exec_id}: it {what}, and only the engine "
            "moves it; cancel the workflow instead", activity_exec_id=activity_exec_id,
            transition=transition)
        self.activity_exec_id = activity_exec_id


def refuse_outside_move(engine: Core, defn: WorkflowDefinition, item: ActivityRecord,
                        verb: Transition) -> None:
    """Raise when an outside caller asks to move an attempt a feature drives.

    Raises:
        EngineDriven: a map's own row, or an attempt running a child workflow.
    """
    spec = defn.activity(item.activity_name)
    for feature in engine.features:
        what = feature.drives(spec, item.activity_name)
        if what is not None:
            raise EngineDriven(activity_exec_id=item.activity_exec_id,
                               transition=verb.value, what=what)


def transition(
    engine: Core,
    activity_exec_id_: str,
    transition: Transition | str,
    *,
    output: Any = None,
    error: Any = None,
    error_type: str | None = None,
    actor: str | None = None,
    assume: ActivityRecord | None = None,
    written_epoch: float | None = None,
    output_json: str | None = None,
) -> ActivityExec:
    """Apply one contract move asked for by a caller outside the engine (the Full
    Logic API, a Simple API row, the CLI), with its guards and follow-ups.

    ``assume`` is a (possibly partial or stale) image of the item to write against
    instead of reading it first; the write stays conditional on its state.
    ``written_epoch``: when the report was written (a Simple API row: DynamoDB's time):
    a result is judged by it (engine/written.py), and a late one keeps it.
    ``output_json``: the output already checked and encoded (``encode_payload``), used
    instead of ``output`` (the intake encodes a row's output once).

    Raises:
        ActivityNotFound: no such activity execution.
        IllegalTransition: the contract never allows this move for this activity
            (``ListenerOnly`` for TIME_OUT: the heartbeat listener's move).
        StateConflict: the move was possible once, but another actor moved the
            activity on first.
        UpstreamNotCompleted: READY/QUEUED while an upstream has not COMPLETED.
        WorkflowNotRunning: QUEUED/PREPARING/RUNNING while the workflow is not RUNNING
            (SUSPENDED: except the RUNNING of an attempt launched before).
        WaitsForEvent: any move but CANCEL asked of a wait (timer, signal, approval).
        InvalidInput: output not JSON or too large.
        ActivityTimedOut: COMPLETED/FAILED of an attempt given up on (TIMED_OUT, LOST):
            kept as its late output or error (engine/late.py), its state unchanged.
    """
    verb = Transition(transition)
    parse_activity_exec_id(activity_exec_id_)
    text = output_json if output_json is not None else \
        encode_payload(output, field="output", max_bytes=MAX_OUTPUT_BYTES)
    item = write_image(engine, activity_exec_id_, assume)
    if verb is Transition.TIME_OUT:
        raise ListenerOnly(current=_state_of(item), activity_exec_id=activity_exec_id_)
    if item.state is None or (item.state, verb) not in ACTIVITY_TRANSITIONS:
        # Judge an illegal move on a fresh read, never on a remembered image.
        item = engine.activity(activity_exec_id_)
        if late.gave_up(item, verb):
            raise late.keep(engine, item, verb, output=text, error=error,
                            written_epoch=written_epoch)
        refuse_illegal(item, verb)
    refuse_outside_move(engine, engine.definition_of(item), item, verb)
    check_guards(engine, item, verb)
    try:
        moved = flow.apply(engine, item, verb, output=text, error=error,
                           error_type=error_type, actor=actor, written_epoch=written_epoch)
    except StateConflict as lost:  # given up on while on its way, or written too late
        if not late.gave_up(lost.current, verb) or lost.current is None:
            raise
        raise late.keep(engine, lost.current, verb, output=text, error=error,
                        written_epoch=written_epoch) from None
    return ActivityExec.from_record(moved)


def write_image(engine: Core, aeid: str, assume: ActivityRecord | None = None) -> ActivityRecord:
    """What to write against: ``assume``, the remembered image, or a fresh read."""
    if assume is not None and assume.state is not None:
        return assume
    return engine.remembered(aeid) or engine.activity(aeid)


def refuse_illegal(item: ActivityRecord, verb: Transition) -> None:
    """Raise when the contract has no ``verb`` from where ``item`` is."""
    state = item.state or A.REQUESTED
    if (state, verb) in ACTIVITY_TRANSITIONS:
        return
    seen = {h.state for h in item.history}
    if any(s.value in seen for (s, t) in ACTIVITY_TRANSITIONS if t is verb):
        raise StateConflict(
            expected=[s.value for (s, t) in ACTIVITY_TRANSITIONS if t is verb],
            actual=state.value, activity_exec_id=item.activity_exec_id,
            transition=verb.value, current=item)
    next_activity_state(state, verb, activity_exec_id=item.activity_exec_id)  # raises


def check_guards(engine: Core, item: ActivityRecord, verb: Transition) -> None:
    """The contract's conditions beyond the state table (docs/contract.md, "Guards").

    Raises:
        UpstreamNotCompleted: READY/QUEUED before every upstream COMPLETED.
        WorkflowNotRunning: a start (QUEUED/PREPARING/RUNNING) in a workflow that is
            not RUNNING (SUSPENDED: unless the attempt was launched before).
    """
    state = item.state or A.REQUESTED
    target = ACTIVITY_TRANSITIONS[(state, verb)]
    defn = engine.definition_of(item)
    spec = defn.activity(item.activity_name)
    if state is A.REQUESTED and target in ACTIVITY_RELEASED and spec.depends_on:
        latest = engine.latest_attempts(item.workflow_exec_id)
        # COMPLETED, or a failure its on_failure took over (contract/outcomes.py).
        open_ = [f"{d} ({_state_of(latest.get(d))})" for d in spec.depends_on
                 if resolution(defn, latest, d) is None]
        if open_:
            raise UpstreamNotCompleted(activity_exec_id=item.activity_exec_id,
                                       transition=verb.value, open_upstreams=open_)
    if target in ACTIVITY_STARTING:
        wf = engine.workflow(item.workflow_exec_id)
        if not rules.may_start_while(wf.state, state):
            raise WorkflowNotRunning(workflow_exec_id=wf.workflow_exec_id,
                                     workflow_state=wf.state.value,
                                     activity_exec_id=item.activity_exec_id,
                                     transition=verb.value)


def finish(engine: Core, aeid: str, transition: Transition, *, output: Any = None,
           error: Any = None, error_type: str | None = None, actor: str = "worker",
           image: ActivityRecord | None = None) -> ActivityRecord:
    """End (COMPLETED, FAILED) or cancel an attempt, by the actor that runs it.

    Raises:
        InvalidInput: ``output`` is not JSON or too large (nothing was written).
        ActivityTimedOut: it was given up on (TIMED_OUT, LOST); the report was kept as
            its late output or error.
        StateConflict: the attempt is no longer where the verb applies.
    """
    text = encode_payload(output, field="output", max_bytes=MAX_OUTPUT_BYTES)
    try:
        return flow.apply(engine, write_image(engine, aeid, image), transition,
                          output=text, error=error, error_type=error_type, actor=actor)
    except StateConflict as lost:  # TIMED_OUT or LOST: kept as late output
        if not late.gave_up(lost.current, transition) or lost.current is None:
            raise
        raise late.keep(engine, lost.current, transition, output=text,
                        error=error) from None


def ensure_followups(engine: Core, activity_exec_id_: str) -> None:
    """Re-run the follow-ups of the activity's current state (redelivery, repair)."""
    flow.after(engine, engine.activity(activity_exec_id_))

# -- the activity's own side -------------------------------------------------------------


def start_running(engine: Core, aeid: str, *, actor: str = "worker") -> ActivityRecord:
    """RUNNING, by the actor that runs the attempt now (a launched process, a claimer).

    No read first: the write expects QUEUED (the usual state of a launched attempt),
    and a lost write says where it really is, from where RUNNING is retried.

    Raises:
        StateConflict: it cannot run (cancelled, timed out, already running...).
    """
    key = parse_activity_exec_id(aeid)
    known = engine.remembered(aeid)
    if known is None:
        known = ActivityRecord(key.workflow_exec_id, aeid, key.activity_name, "",
                               key.attempt, A.QUEUED)
    if not known.workflow_name or known.workflow_version is None:
        known = engine.activity(aeid)
    return flow.apply(engine, known, Transition.RUNNING, actor=actor)


def heartbeat(engine: Core, aeid: str, image: ActivityRecord | None = None,
              written_epoch: float | None = None) -> ActivityState:
    """Record that the attempt is alive and push its heartbeat deadline forward (never
    past its close deadline); one written past the deadline times it out (written.py).

    Raises:
        ActivityCancelled: it was cancelled (the heartbeat was still recorded when it
            is CANCELLED_RUNNING); stop work.
        ActivityTimedOut: the system gave up on it (TIMED_OUT, LOST), or does now.
        StateConflict: it is not running (never started, or finished).
    """
    item = image
    if item is None or item.state not in ACTIVITY_ACTIVE:
        item = engine.activity(aeid)
    now = engine.clock()
    changes: dict[str, Any] = {"heartbeat_epoch": now}
    if item.heartbeat_timeout_seconds:
        deadline = min(now + item.heartbeat_timeout_seconds, item.close_epoch or float("inf"))
        # The real deadline only (0 index writes a beat): the sweep re-arms the timer.
        changes["deadline_epoch"] = deadline
    try:
        # Only a live attempt heartbeats; TIMED_OUT items keep their state forever.
        moved = engine.store.set_activity(aeid, changes, states=ACTIVITY_ACTIVE,
                                          alive_at=written_epoch or now)
    except StateConflict as lost:
        written.late_heartbeat(engine, lost.current, written_epoch or now)
        state = lost.current.state if lost.current else None
        if state in ACTIVITY_GAVE_UP and state is not None:
            raise ActivityTimedOut(aeid, state.value) from None
        if state is A.CANCELLED:
            raise ActivityCancelled(aeid, state.value) from None
        raise StateConflict(expected=sorted(s.value for s in ACTIVITY_ACTIVE),
                            actual=state.value if state else None, activity_exec_id=aeid,
                            transition="HEARTBEAT", current=lost.current) from None
    engine.remember(moved)
    if moved.state is A.CANCELLED_RUNNING:
        raise ActivityCancelled(aeid)
    return moved.state or A.RUNNING


def claim(engine: Core, workflow_name: str | None = None, activity_name: str | None = None, *,
          actor: str = "worker") -> ActivityRecord | None:
    """Take one READY ``external`` attempt (READY → RUNNING), or None if none waits in
    a RUNNING workflow.

    Candidates come from the sparse ``claimable`` index: first a window of
    ``CLAIM_WINDOW`` shards at a random offset with the priority shards (attempts whose
    priority is not the default; read at once), then, when they hold nothing or another
    worker took all they held, the other shards (read at once), so that workers spread
    over the shards and a claim reads 8 shards of each table, not all of them, while a
    backlog lasts. Candidates are tried lower priority first, then the oldest run (the
    claim key's order, aging included: contract/priority.py), equals in a random order;
    so every claim serves non-default priorities in order, and default-priority work
    oldest first among what its window holds. The move is conditional, so two workers
    never claim the same attempt. The workflow item is read while the move is in
    flight; an attempt claimed in a workflow that turned out to be ending is given up at
    once (CANCELLED) and the next candidate is tried.
    """
    prefix = ""
    if workflow_name:
        prefix = f"{workflow_name}/" + (f"{activity_name}/" if activity_name else "")
    shards = list(engine.store.claim_shards)
    start = random.randrange(len(shards))
    shards = shards[start:] + shards[:start]
    first = [*engine.store.priority_claim_shards, *shards[:CLAIM_WINDOW]]
    for group in (first, shards[CLAIM_WINDOW:]):
        hits = [hit for hit in engine.store.claimable_among(group, prefix, CLAIM_CANDIDATES)
                if not (activity_name and not workflow_name
                        and hit.activity_name != activity_name)]
        # Most urgent first, then the oldest run; workers polling together may still see
        # the same candidates, so equals (within CLAIM_ORDER_GRAIN_SECONDS of serving
        # order) go in a random order: fewer lost writes.
        hits.sort(key=lambda h: (serving_grain(h.claim_key, CLAIM_ORDER_GRAIN_SECONDS),
                                 random.random()))
        claimed = _claim_one(engine, hits, actor)
        if claimed is not None:
            return claimed
    return None


def _claim_one(engine: Core, hits: list[ActivityRecord], actor: str) -> ActivityRecord | None:
    """The first of ``hits`` this worker moves to RUNNING in a proceeding run, or None."""
    for hit in hits:
        wf_read = engine.in_background(engine.workflow, hit.workflow_exec_id)
        try:
            claimed = flow.apply(engine, hit, Transition.RUNNING, actor=actor, claimed=True)
        except StateConflict:
            wf_read.cancel()
            continue  # another worker was faster
        wf = wf_read.result()
        # SUSPENDED: claimed as the suspend landed; it runs (as if claimed just before).
        if wf.state in WORKFLOW_PROCEEDING:
            engine.prefetched_workflow(hit.activity_exec_id, wf_read)
            return claimed
        give_up(engine, claimed, wf)
    return None


def give_up(engine: Core, item: ActivityRecord, wf: WorkflowRecord) -> None:
    """End an attempt this actor moved to RUNNING but never started, because its
    workflow is ending: RUNNING → CANCELLED_RUNNING → CANCELLED in one write."""
    defn = engine.definition_of(wf)
    spec = defn.activity(item.activity_name)
    path = activity_path(A.RUNNING, Transition.CANCEL, Transition.FAILED)
    changes = rules.changes_for(spec, A.RUNNING, path[-1], now=engine.clock(),
                                workflow_name=item.workflow_name,
                                retention=engine.retention(defn),
                                error=f"claimed while workflow was {wf.state.value}")
    try:
        moved = engine.move(item.activity_exec_id, A.RUNNING, path, changes)
    except StateConflict:
        return
    flow.after(engine, moved)


def _state_of(item: ActivityRecord | None) -> str:
    return item.state.value if item is not None and item.state else "not created"


# -- a wait's event ------------------------------------------------------------------------

def end_wait(engine: Core, item: ActivityRecord, defn: WorkflowDefinition,
             verb: Transition, *, output: str | None = None, error: str | None = None,
             error_type: str | None = None, actor: str | None = None,
             due_by: float | None = None) -> ActivityRecord:
    """``READY → RUNNING → COMPLETED`` (or ``→ FAILED``) in one write, then the
    follow-ups. Nobody else can move in between: RUNNING belongs to whoever runs the
    activity, and for a wait that is whoever makes its event happen, in this write.

    Raises:
        StateConflict: the wait was not READY (``current`` says where it is).
    """
    spec = defn.activity(item.activity_name)
    now = engine.clock()
    path = activity_path(A.READY, Transition.RUNNING, verb,
                         activity_exec_id=item.activity_exec_id)
    changes = rules.changes_for(spec, A.READY, path[-1], now=now,
                                workflow_name=item.workflow_name,
                                retention=engine.retention(defn), output=output,
                                error=error, error_type=error_type)
    changes["started_epoch"] = now
    wf_read: Future[WorkflowRecord] = engine.in_background(engine.workflow,
                                                           item.workflow_exec_id)
    try:
        moved = engine.move(item.activity_exec_id, A.READY, path, changes, actor=actor,
                            due_by=due_by)
    except StateConflict:
        wf_read.cancel()
        raise
    flow.after(engine, moved, wf_read)
    return moved
