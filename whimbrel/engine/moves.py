"""The moves callers ask for (part of the core): a contract move with its guards, an
attempt's own RUNNING and end (its heartbeat: ``heartbeats.py``), claims, and the
one-write end of a wait by whoever makes its event happen (a timer's sweep, a signal's
sender, an approver).

Every state change is one conditional write through the store port, then its
follow-ups (``flow.py``).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from whimbrel.contract.code.definition import is_cleanup_step
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import (
    ListenerOnly,
    NotAllowedNow,
    StateConflict,
    UpstreamNotCompleted,
    WorkflowNotRunning,
)
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.outcomes import resolution
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import (
    ACTIVITY_RELEASED,
    ACTIVITY_STARTING,
    ACTIVITY_TRANSITIONS,
    ActivityState,
    Transition,
    WorkflowState,
    activity_path,
    next_activity_state,
)
from whimbrel.engine import late, rules
from whimbrel.engine.feature import Core, Feature
from whimbrel.engine.payloads import resolved
from whimbrel.engine.views import ActivityExec

A = ActivityState


class EngineDriven(NotAllowedNow):
    """A move asked for an attempt only the engine moves: a map's own row (its items
    decide its end) or an attempt that runs a child workflow (the child decides)."""

    def __init__(self, *, activity_exec_id: str, transition: str, what: str) -> None:
        super().__init__(
            f"{transition} refused for {activity_exec_id}: it {what}, and only the engine "
            "moves it; cancel the workflow instead", activity_exec_id=activity_exec_id,
            transition=transition)
        self.activity_exec_id = activity_exec_id


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




def _state_of(item: ActivityRecord | None) -> str:
    return item.state.value if item is not None and item.state else "not created"


class Moves:
    """The moves callers ask for (a transition with its guards, a worker's finish and
    start), and a wait's one-write end. A part of the engine: ``engine.moves.op(…)``."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def refuse_outside_move(self, defn: WorkflowDefinition, item: ActivityRecord,
                            verb: Transition) -> None:
        """Raise when an outside caller asks to move an attempt a feature drives.

        Raises:
            EngineDriven: a map's own row, or an attempt running a child workflow.
        """
        spec = defn.activity(item.activity_name)
        what = self.core.hooks.first_answer(Feature.drives, spec, item.activity_name)
        if what is not None:
            raise EngineDriven(activity_exec_id=item.activity_exec_id,
                               transition=verb.value, what=what)

    def transition(
        self,
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
            self.core.reads.limits.encode(output, "output")
        item = self.write_image(activity_exec_id_, assume)
        if verb is Transition.TIME_OUT:
            raise ListenerOnly(current=_state_of(item), activity_exec_id=activity_exec_id_)
        if item.state is None or (item.state, verb) not in ACTIVITY_TRANSITIONS:
            # Judge an illegal move on a fresh read, never on a remembered image.
            item = self.core.reads.activity(activity_exec_id_)
            if late.gave_up(item, verb):
                raise late.keep(self.core, item, verb, output=text, error=error,
                                written_epoch=written_epoch)
            refuse_illegal(item, verb)
        self.refuse_outside_move(self.core.definitions.definition_of(item), item, verb)
        self.check_guards(item, verb)
        try:
            moved = self.core.flow.apply(item, verb, output=text, error=error,
                               error_type=error_type, actor=actor, written_epoch=written_epoch)
        except StateConflict as lost:  # given up on while on its way, or written too late
            if not late.gave_up(lost.current, verb) or lost.current is None:
                raise
            raise late.keep(self.core, lost.current, verb, output=text, error=error,
                            written_epoch=written_epoch) from None
        # An output kept in S3 is in this process's cache already (it wrote or read it).
        return ActivityExec.from_record(resolved(self.core, moved))

    def write_image(self, aeid: str, assume: ActivityRecord | None = None) -> ActivityRecord:
        """What to write against: ``assume``, the remembered image, or a fresh read."""
        if assume is not None and assume.state is not None:
            return assume
        return self.core.known.remembered(aeid) or self.core.reads.activity(aeid)

    def check_guards(self, item: ActivityRecord, verb: Transition) -> None:
        """The contract's conditions beyond the state table (docs/contract.md, "Guards").

        Raises:
            UpstreamNotCompleted: READY/QUEUED before every upstream COMPLETED.
            WorkflowNotRunning: a start (QUEUED/PREPARING/RUNNING) in a workflow that is
                not RUNNING (SUSPENDED: unless the attempt was launched before).
        """
        state = item.state or A.REQUESTED
        target = ACTIVITY_TRANSITIONS[(state, verb)]
        defn = self.core.definitions.definition_of(item)
        spec = defn.activity(item.activity_name)
        if state is A.REQUESTED and target in ACTIVITY_RELEASED and spec.depends_on:
            latest = self.core.reads.latest_attempts(item.workflow_exec_id)
            # COMPLETED, or a failure its on_failure took over (contract/outcomes.py).
            open_ = [f"{d} ({_state_of(latest.get(d))})" for d in spec.depends_on
                     if resolution(defn, latest, d) is None]
            if open_:
                raise UpstreamNotCompleted(activity_exec_id=item.activity_exec_id,
                                           transition=verb.value, open_upstreams=open_)
        if target in ACTIVITY_STARTING:
            wf = self.core.reads.workflow(item.workflow_exec_id)
            # A code run's clean-up step starts while its run is being cancelled
            # (engine/code_cancel.py).
            cleanup = wf.state is WorkflowState.CANCEL_REQUESTED and is_cleanup_step(item.step)
            if not rules.may_start_while(wf.state, state) and not cleanup:
                raise WorkflowNotRunning(workflow_exec_id=wf.workflow_exec_id,
                                         workflow_state=wf.state.value,
                                         activity_exec_id=item.activity_exec_id,
                                         transition=verb.value)

    def finish(self, aeid: str, transition: Transition, *, output: Any = None,
               error: Any = None, error_type: str | None = None, actor: str = "worker",
               image: ActivityRecord | None = None) -> ActivityRecord:
        """End (COMPLETED, FAILED) or cancel an attempt, by the actor that runs it.

        Raises:
            InvalidInput: ``output`` is not JSON or too large (nothing was written).
            ActivityTimedOut: it was given up on (TIMED_OUT, LOST); the report was kept as
                its late output or error.
            StateConflict: the attempt is no longer where the verb applies.
        """
        text = self.core.reads.limits.encode(output, "output")
        try:
            return self.core.flow.apply(self.write_image(aeid, image), transition,
                              output=text, error=error, error_type=error_type, actor=actor)
        except StateConflict as lost:  # TIMED_OUT or LOST: kept as late output
            if not late.gave_up(lost.current, transition) or lost.current is None:
                raise
            raise late.keep(self.core, lost.current, transition, output=text,
                            error=error) from None

    def ensure_followups(self, activity_exec_id_: str) -> None:
        """Re-run the follow-ups of the activity's current state (redelivery, repair)."""
        self.core.flow.after(self.core.reads.activity(activity_exec_id_))

    # -- the activity's own side -------------------------------------------------------------

    def start_running(self, aeid: str, *, actor: str = "worker") -> ActivityRecord:
        """RUNNING, by the actor that runs the attempt now (a launched process, a claimer).

        No read first: the write expects QUEUED (the usual state of a launched attempt),
        and a lost write says where it really is, from where RUNNING is retried.

        Raises:
            StateConflict: it cannot run (cancelled, timed out, already running...).
        """
        key = parse_activity_exec_id(aeid)
        known = self.core.known.remembered(aeid)
        if known is None:
            known = ActivityRecord(key.workflow_exec_id, aeid, key.activity_name, "",
                                   key.attempt, A.QUEUED)
        if not known.workflow_name or known.workflow_version is None:
            known = self.core.reads.activity(aeid)
        return self.core.flow.apply(known, Transition.RUNNING, actor=actor)

    # -- a wait's event ------------------------------------------------------------------------

    def end_wait(self, item: ActivityRecord, defn: WorkflowDefinition,
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
        now = self.core.clock()
        path = activity_path(A.READY, Transition.RUNNING, verb,
                             activity_exec_id=item.activity_exec_id)
        changes = rules.changes_for(spec, A.READY, path[-1], now=now,
                                    workflow_name=item.workflow_name,
                                    retention=self.core.definitions.retention(defn), output=output,
                                    error=error, error_type=error_type)
        changes["started_epoch"] = now
        wf_read: Future[WorkflowRecord] = self.core.threads.in_background(self.core.reads.workflow,
                                                               item.workflow_exec_id)
        try:
            moved = self.core.known.move(item.activity_exec_id, A.READY, path, changes, actor=actor,
                                due_by=due_by)
        except StateConflict:
            wf_read.cancel()
            raise
        self.core.flow.after(moved, wf_read)
        return moved
