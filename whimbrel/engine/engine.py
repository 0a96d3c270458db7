"""The full logic: start, the moves callers ask for (with the contract's guards),
heartbeats and claims. Hand-offs live in ``flow.py``, workflow ends in ``ending.py``,
sweep and reconcile in ``sweep.py``.

Every state change is one conditional write through the store port. Follow-up work is
idempotent and re-derivable from the tables, so a crash between any two writes is
repaired by a replay (stream redelivery) or by the reconciler (docs/architecture.md).
"""

from __future__ import annotations

import logging
import random
from concurrent.futures import Future
from typing import Any

from whimbrel.contract import checks
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import (
    ActivityCancelled,
    ActivityTimedOut,
    InvalidInput,
    ListenerOnly,
    StateConflict,
    UpstreamNotCompleted,
    WorkflowNotRunning,
)
from whimbrel.contract.ids import (
    END_NODE,
    activity_exec_id,
    new_request_id,
    parse_activity_exec_id,
    workflow_exec_id_for,
)
from whimbrel.contract.limits import MAX_INPUT_BYTES, MAX_OUTPUT_BYTES
from whimbrel.contract.outcomes import resolution
from whimbrel.contract.payloads import encode_payload
from whimbrel.contract.records import ActivityRecord, Change, RequestRecord, WorkflowRecord
from whimbrel.contract.states import (
    ACTIVITY_ACTIVE,
    ACTIVITY_STARTING,
    ACTIVITY_TRANSITIONS,
    WORKFLOW_PROCEEDING,
    ActivityState,
    Transition,
    WorkflowState,
    activity_path,
    next_activity_state,
)
from whimbrel.contract.waits import check_input
from whimbrel.engine import rules, signals, waits
from whimbrel.engine.base import day_of
from whimbrel.engine.data import DataFlow, refuse_outside_move
from whimbrel.engine.ports import runs_in_process
from whimbrel.engine.views import ActivityExec

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState

#: Claim candidates asked of each shard of the claimable index.
CLAIM_CANDIDATES = 25


class Engine(DataFlow):
    """Whimbrel's full logic over one store. Thread-safe; share one per process.

    Args:
        store: the tables (:class:`~whimbrel.engine.ports.StorePort`).
        clock: returns epoch seconds (inject one to drive time in tests).
        launchers: how activities start, by launcher kind.
        actor: recorded in the history of every move this engine makes.
        reconcile_grace_seconds: first reconcile visit after a start.
        retention_days: default retention of ended runs (None: forever).
    """

    # -- start -----------------------------------------------------------------------

    def start(
        self,
        name: str,
        input: Any = None,
        *,
        version: int | None = None,
        request_id: str | None = None,
        source: str | None = None,
        write_request: bool = True,
        parent: str | None = None,
    ) -> str:
        """Start (or resume starting) the execution for ``request_id``. Idempotent.

        The starter writes the workflow item RUNNING (REQUESTED → RUNNING in one write:
        nobody else can act on a run that does not exist yet), creates the activity rows,
        reads the workflow item back — nothing is launched unless it is still RUNNING —
        and launches the roots.

        ``parent`` is the activity attempt that starts this run as its child.

        Raises:
            DefinitionNotFound: unknown workflow name or version.
            InvalidInput: input too large or not JSON; request id used for another workflow.
        """
        payload = encode_payload(input, field="input", max_bytes=MAX_INPUT_BYTES)
        checks.workflow_name(name)
        checks.optional_text(source, "source")
        request_id = new_request_id() if request_id is None else request_id
        wx = workflow_exec_id_for(request_id)  # refuses an empty or malformed id
        version, defn = self.definition(name, version)
        check_input(defn.activities, input)  # a timer's time must be in the input
        now = self.clock()
        expires = None
        if write_request:
            # The trace expires a day after the end of any run shorter than a day, so
            # the end needs no write to it (ending.py, before_end).
            expires = rules.expiry(now + rules.RETENTION_SLACK_SECONDS, self.retention(defn))
            self.store.put_request(RequestRecord(
                request_id, name, now, version=version, input=payload, manual=True,
                source=source, workflow_exec_id=wx, expires_epoch=expires))
        record = WorkflowRecord(
            workflow_exec_id=wx, workflow_name=name, version=version, state=W.RUNNING,
            workflow_request_id=request_id, input=payload, source=source, created_epoch=now,
            created_day=day_of(now), updated_epoch=now,
            check_epoch=self.next_check(now, now, defn), request_expires_epoch=expires,
            parent_activity_exec_id=parent,
            history=(Change(W.REQUESTED.value, now, self.actor),
                     Change(W.RUNNING.value, now, self.actor)))
        if not self.store.create_workflow(record):
            existing = self.workflow(wx)
            if existing.workflow_name != name:
                raise InvalidInput(
                    f"request id {request_id!r} already started workflow "
                    f"{existing.workflow_name!r}, not {name!r}", field="workflow_request_id")
            self.resume_start(existing, defn)  # repairs a start that died half-way
            return wx
        self.launch_roots(record, defn, self.materialize(record, defn))
        return wx

    def next_check(self, created: float, now: float, defn: WorkflowDefinition,
                   interval: float | None = None) -> float:
        """The next reconcile visit of a live run: after ``interval`` (the grace period
        when None), and never later than the run's own deadline."""
        visit = now + (self.reconcile_grace_seconds if interval is None else interval)
        if defn.timeout_seconds is not None:
            return min(visit, created + float(defn.timeout_seconds))
        return visit

    def resume_start(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                     rows: list[ActivityRecord] | None = None) -> bool:
        """Finish a start that died half-way (a redelivered request, the reconciler).
        Idempotent; True if something was missing.

        A root's row is created only once every other row and edge exists (phase two of
        ``materialize``), so a run with all its roots needs nothing; one with no root
        redoes phase one (no root ever ran, so no edge was consumed yet).
        """
        wx = wf.workflow_exec_id
        if wf.state is W.REQUESTED:  # an item from before the one-write start
            self.materialize(wf, defn)
            try:
                wf = self.store.move_workflow(wx, [W.REQUESTED], W.RUNNING, {},
                                              now=self.clock(), actor=self.actor,
                                              workflow_name=wf.workflow_name)
            except StateConflict:
                pass
        if wf.state is not W.RUNNING:
            self.settle(wx)
            return False
        have = {a.activity_name for a in (self.store.list_activities(wx)
                                          if rows is None else rows)}
        missing_roots = [r for r in defn.roots if r not in have]
        if not missing_roots:
            return False
        created = self.materialize(wf, defn, phase_one=len(missing_roots) == len(defn.roots))
        self.launch_roots(wf, defn, created)
        return True

    def materialize(self, wf: WorkflowRecord, defn: WorkflowDefinition, *,
                    phase_one: bool = True) -> set[str]:
        """Create a run's activity rows and fan-in edges (idempotently); returns the
        roots whose rows this call created.

        Phase one: the rows of activities with upstreams (REQUESTED) and the edges.
        Phase two, once all of phase one is written: the roots, in their first state —
        QUEUED for a push launcher (its creator launches it), READY for a pull one (it
        becomes claimable), REQUESTED for an in-process launcher (its one-write move to
        RUNNING comes after the workflow read, and a crash before that leaves it for
        the reconciler, not for a time-out).
        """
        wx = wf.workflow_exec_id
        now = self.clock()
        if phase_one:
            jobs: list[Future[Any]] = [
                self._pool.submit(self.store.create_activity,
                                  self.new_attempt(wf, defn, a.name, 1, now))
                for a in defn.activities if a.depends_on]
            # Fan-in edges exist only for activities with two or more upstreams (and for
            # the workflow's end when it has two or more sinks); one-upstream hand-offs
            # need none. Unconditional puts: no root exists yet, so none was consumed.
            for act in defn.activities:
                if len(act.depends_on) > 1:
                    jobs.append(self._pool.submit(
                        self.store.put_dependencies, wx, act.name, act.depends_on))
            if len(defn.sinks) > 1:
                jobs.append(self._pool.submit(self.store.put_dependencies, wx, END_NODE,
                                              defn.sinks))
            for job in jobs:
                job.result()
        created = self.each(lambda root: root if self.create_root(wf, defn, root, now)
                            else None, defn.roots)
        return {r for r in created if r is not None}

    def create_root(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
                    now: float) -> bool:
        spec = defn.activity(name)
        record = self.new_attempt(wf, defn, name, 1, now)
        launcher = self.launchers.get(spec.launcher.kind)
        if (spec.launcher.is_push and launcher is not None and runs_in_process(launcher)) \
                or spec.map_over is not None:  # a map expands when advanced (maps.py)
            return self.store.create_activity(record)
        verb = Transition.QUEUED if spec.launcher.is_push else Transition.READY
        path = activity_path(A.REQUESTED, verb)
        changes = rules.changes_for(spec, A.REQUESTED, path[-1], now=now,
                                    workflow_name=wf.workflow_name,
                                    retention=self.retention(defn))
        if path[-1] is A.READY:
            changes = waits.ready_changes(spec, wf, now, changes)
        timer = changes.get("timer_epoch")
        record = record.with_changes(
            state=path[-1], timer_epoch=timer if isinstance(timer, float) else None,
            **waits.record_fields(changes),
            history=record.history + tuple(Change(s.value, now, self.actor) for s in path))
        if "claimable" in changes:
            return self.store.create_claimable(record)
        return self.store.create_activity(record)

    def launch_roots(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                     created: set[str]) -> None:
        """Launch the roots, if the workflow is (still) RUNNING: a QUEUED root by the actor
        that created it, an in-process one by the winner of its move to RUNNING."""
        current = self.workflow(wf.workflow_exec_id)
        if current.state is not W.RUNNING:
            self.settle(wf.workflow_exec_id)  # cancelled while starting
            return

        def go(name: str) -> None:
            spec = defn.activity(name)
            if spec.map_over is not None:
                self.advance(current, defn, name, 1)  # expands the map (maps.py)
                return
            if not spec.launcher.is_push:  # READY, waiting to be claimed (or its event)
                if name in created:  # a signal sent while the run started is kept
                    signals.after_ready(self, current, defn, ActivityRecord(
                        wf.workflow_exec_id, activity_exec_id(wf.workflow_exec_id, name, 1),
                        name, wf.workflow_name, 1, A.READY, workflow_version=wf.version))
                return
            if self.plan(current, defn, name, A.REQUESTED)[-1:] == (A.RUNNING,):
                self.advance(current, defn, name, 1)
            elif name in created:
                self.launch(current, defn, ActivityRecord(
                    wf.workflow_exec_id, activity_exec_id(wf.workflow_exec_id, name, 1),
                    name, wf.workflow_name, 1, A.QUEUED, workflow_version=wf.version))

        self.each(go, defn.roots)

    # -- moves callers ask for ---------------------------------------------------------------

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
    ) -> ActivityExec:
        """Apply one contract move asked for by a caller outside the engine (the Full
        Logic API, a Simple API row, the CLI), with its guards and follow-ups.

        ``assume`` is a (possibly partial or stale) image of the item to write against
        instead of reading it first; the write stays conditional on its state.

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
        """
        verb = Transition(transition)
        parse_activity_exec_id(activity_exec_id_)
        text = encode_payload(output, field="output", max_bytes=MAX_OUTPUT_BYTES)
        item = self.image(activity_exec_id_, assume)
        if verb is Transition.TIME_OUT:
            raise ListenerOnly(current=_state_of(item), activity_exec_id=activity_exec_id_)
        if item.state is None or (item.state, verb) not in ACTIVITY_TRANSITIONS:
            # Judge an illegal move on a fresh read, never on a remembered image.
            item = self.activity(activity_exec_id_)
            self.refuse_illegal(item, verb)
        refuse_outside_move(self.definition_of(item), item, verb)
        self.check_guards(item, verb)
        moved = self.apply(item, verb, output=text, error=error, error_type=error_type,
                           actor=actor)
        return ActivityExec.from_record(moved)

    def image(self, aeid: str, assume: ActivityRecord | None = None) -> ActivityRecord:
        """What to write against: ``assume``, the remembered image, or a fresh read."""
        if assume is not None and assume.state is not None:
            return assume
        return self.remembered(aeid) or self.activity(aeid)

    @staticmethod
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

    def check_guards(self, item: ActivityRecord, verb: Transition) -> None:
        """The contract's conditions beyond the state table (docs/contract.md, "Guards").

        Raises:
            UpstreamNotCompleted: READY/QUEUED before every upstream COMPLETED.
            WorkflowNotRunning: a start (QUEUED/PREPARING/RUNNING) in a workflow that is
                not RUNNING (SUSPENDED: unless the attempt was launched before).
        """
        state = item.state or A.REQUESTED
        target = ACTIVITY_TRANSITIONS[(state, verb)]
        defn = self.definition_of(item)
        spec = defn.activity(item.activity_name)
        if state is A.REQUESTED and target in (A.READY, A.QUEUED) and spec.depends_on:
            latest = self.latest_attempts(item.workflow_exec_id)
            # COMPLETED, or a failure its on_failure took over (contract/outcomes.py).
            open_ = [f"{d} ({_state_of(latest.get(d))})" for d in spec.depends_on
                     if resolution(defn, latest, d) is None]
            if open_:
                raise UpstreamNotCompleted(activity_exec_id=item.activity_exec_id,
                                           transition=verb.value, open_upstreams=open_)
        if target in ACTIVITY_STARTING:
            wf = self.workflow(item.workflow_exec_id)
            if not waits.may_start_while(wf.state, state):
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
            StateConflict: the attempt is no longer where the verb applies.
        """
        text = encode_payload(output, field="output", max_bytes=MAX_OUTPUT_BYTES)
        return self.apply(self.image(aeid, image), transition, output=text, error=error,
                          error_type=error_type, actor=actor)

    def ensure_followups(self, activity_exec_id_: str) -> None:
        """Re-run the follow-ups of the activity's current state (redelivery, repair)."""
        self.after(self.activity(activity_exec_id_))

    # -- the activity's own side -------------------------------------------------------------

    def start_running(self, aeid: str, *, actor: str = "worker") -> ActivityRecord:
        """RUNNING, by the actor that runs the attempt now (a launched process, a claimer).

        No read first: the write expects QUEUED (the usual state of a launched attempt),
        and a lost write says where it really is, from where RUNNING is retried.

        Raises:
            StateConflict: it cannot run (cancelled, timed out, already running...).
        """
        key = parse_activity_exec_id(aeid)
        known = self.remembered(aeid)
        if known is None:
            known = ActivityRecord(key.workflow_exec_id, aeid, key.activity_name, "",
                                   key.attempt, A.QUEUED)
        if not known.workflow_name or known.workflow_version is None:
            known = self.activity(aeid)
        return self.apply(known, Transition.RUNNING, actor=actor)

    def heartbeat(self, aeid: str, image: ActivityRecord | None = None) -> ActivityState:
        """Record that the attempt is alive and push its heartbeat deadline forward (never
        past its close deadline).

        Raises:
            ActivityCancelled: it was cancelled (the heartbeat was still recorded when it
                is CANCELLED_RUNNING); stop work.
            ActivityTimedOut: the system already gave up on it.
            StateConflict: it is not running (never started, or finished).
        """
        item = image
        if item is None or item.state not in ACTIVITY_ACTIVE:
            item = self.activity(aeid)
        now = self.clock()
        changes: dict[str, Any] = {"heartbeat_epoch": now}
        if item.heartbeat_timeout_seconds:
            deadline = now + item.heartbeat_timeout_seconds
            if item.close_epoch is not None:
                deadline = min(deadline, item.close_epoch)
            changes["timer_epoch"] = deadline
        try:
            # Only a live attempt heartbeats; TIMED_OUT items keep their state forever.
            moved = self.store.set_activity(aeid, changes, states=ACTIVITY_ACTIVE)
        except StateConflict as lost:
            state = lost.current.state if lost.current else None
            if state is A.TIMED_OUT:
                raise ActivityTimedOut(aeid) from None
            if state is A.CANCELLED:
                raise ActivityCancelled(aeid, state.value) from None
            raise StateConflict(expected=sorted(s.value for s in ACTIVITY_ACTIVE),
                                actual=state.value if state else None, activity_exec_id=aeid,
                                transition="HEARTBEAT", current=lost.current) from None
        self.remember(moved)
        if moved.state is A.CANCELLED_RUNNING:
            raise ActivityCancelled(aeid)
        return moved.state or A.RUNNING

    def claim(self, workflow_name: str | None = None, activity_name: str | None = None, *,
              actor: str = "worker") -> ActivityRecord | None:
        """Take one READY ``external`` attempt (READY → RUNNING), or None if none waits in
        a RUNNING workflow.

        Candidates come from the sparse ``claimable`` index (all shards at once, one round
        trip); the move is conditional, so two workers never claim the same attempt. The
        workflow item is read while the move is in flight; an attempt claimed in a
        workflow that turned out to be ending is given up at once (CANCELLED) and the next
        candidate is tried.
        """
        prefix = ""
        if workflow_name:
            prefix = f"{workflow_name}/" + (f"{activity_name}/" if activity_name else "")
        shards = list(self.store.claim_shards)
        random.shuffle(shards)
        pending = [self.in_background(
            lambda shard: self.store.claimable(shard, prefix, CLAIM_CANDIDATES), shard)
            for shard in shards]
        hits = [hit for future in pending for hit in future.result()
                if not (activity_name and not workflow_name
                        and hit.activity_name != activity_name)]
        # Workers polling together see the same candidates: try them in a random order,
        # or they all race for the first one and lose conditional writes.
        random.shuffle(hits)
        for hit in hits:
            wf_read = self.in_background(self.workflow, hit.workflow_exec_id)
            try:
                claimed = self.apply(hit, Transition.RUNNING, actor=actor, claimed=True)
            except StateConflict:
                wf_read.cancel()
                continue  # another worker was faster
            wf = wf_read.result()
            # SUSPENDED: claimed as the suspend landed; it runs (as if claimed just before).
            if wf.state in WORKFLOW_PROCEEDING:
                self.prefetched_workflow(hit.activity_exec_id, wf_read)
                return claimed
            self.give_up(claimed, wf)
        return None

    def give_up(self, item: ActivityRecord, wf: WorkflowRecord) -> None:
        """End an attempt this actor moved to RUNNING but never started, because its
        workflow is ending: RUNNING → CANCELLED_RUNNING → CANCELLED in one write."""
        defn = self.definition_of(wf)
        spec = defn.activity(item.activity_name)
        path = activity_path(A.RUNNING, Transition.CANCEL, Transition.FAILED)
        changes = rules.changes_for(spec, A.RUNNING, path[-1], now=self.clock(),
                                    workflow_name=item.workflow_name,
                                    retention=self.retention(defn),
                                    error=f"claimed while workflow was {wf.state.value}")
        try:
            moved = self.move(item.activity_exec_id, A.RUNNING, path, changes)
        except StateConflict:
            return
        self.after(moved)


def _state_of(item: ActivityRecord | None) -> str:
    return item.state.value if item is not None and item.state else "not created"
