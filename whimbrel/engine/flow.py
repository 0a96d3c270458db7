"""Hand-offs: what follows an activity's end (dependents readied and launched, retries,
the workflow's completion), and moving one attempt as far as its actor may.

Moves made in one write (docs/contract.md): an actor makes, in one conditional write,
consecutive moves that nobody else can make in between — a push activity whose last
upstream just completed goes REQUESTED → READY → QUEUED, and, for an in-process
launcher, on to RUNNING. Each state still lands in the item's history.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import Future

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import StateConflict, WhimbrelError
from whimbrel.contract.ids import END_NODE, activity_exec_id, unit_random
from whimbrel.contract.outcomes import carry, open_activities
from whimbrel.contract.payloads import clip_error
from whimbrel.contract.records import ActivityRecord, Change, WorkflowRecord
from whimbrel.contract.states import (
    ACTIVITY_TRANSITIONS,
    WORKFLOW_PROCEEDING,
    ActivityState,
    Transition,
    WorkflowState,
)
from whimbrel.engine import rules, signals, waits
from whimbrel.engine.base import latest_of
from whimbrel.engine.ending import WorkflowEnding
from whimbrel.engine.ports import LaunchRequest, runs_in_process

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState


class Flow(WorkflowEnding):
    """Follow-ups of activity ends, and launching."""

    # -- follow-ups -----------------------------------------------------------------------

    def after(self, item: ActivityRecord,
              wf_read: Future[WorkflowRecord] | None = None) -> None:
        """Follow-ups of the state ``item`` is now in. Idempotent.

        ``wf_read`` is a read of the workflow item started together with the move (it
        saves a sequential round trip on every hand-off).
        """
        wf = self.run_going_on(item, wf_read)
        if wf is None:
            return
        state = item.state
        defn = self.definition_of(wf)
        if state is A.COMPLETED:
            self.after_completed(wf, defn, item.activity_name)
        elif state in (A.FAILED, A.TIMED_OUT):
            self.on_failure(wf, defn, item)
        else:  # CANCELLED while the workflow runs: nothing downstream can ever run
            self.fail_workflow(wf, f"activity {item.activity_name} was cancelled")

    def run_going_on(self, item: ActivityRecord,
                     wf_read: Future[WorkflowRecord] | None = None) -> WorkflowRecord | None:
        """The run of an attempt that just ended, when its follow-ups apply; None when
        it has not ended, or its run is failing, cancelled or over (then it is settled)."""
        state = item.state
        if state is None or not state.is_terminal:
            if wf_read is not None:
                wf_read.cancel()
            return None
        wf = wf_read.result() if wf_read is not None else self.workflow(item.workflow_exec_id)
        if not self.proceeds(wf):
            self.settle(wf.workflow_exec_id)  # failing, cancelled, or a straggler of an end
            return None
        return wf

    @staticmethod
    def proceeds(wf: WorkflowRecord) -> bool:
        """Whether a run's follow-ups go on (it is neither ending nor over); ``plan``
        decides how far each attempt then moves."""
        return wf.state in WORKFLOW_PROCEEDING

    def after_completed(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                        name: str) -> None:
        """Ready (and launch) the dependents whose upstreams all completed; complete the
        workflow when ``name`` was its last sink."""
        wx = wf.workflow_exec_id

        def release(dep: str) -> str | None:
            if len(defn.activity(dep).depends_on) > 1:
                # Delete our edge, then look for any edge left. Of two upstreams that
                # finish together at least one sees none left (each deletes before it
                # reads); both may, and then the move's condition picks one winner.
                self.store.delete_dependency(wx, dep, name)
                if self.store.pending_dependencies(wx, dep):
                    return None
            return dep

        ready = [d for d in self.each(release, defn.dependents(name)) if d is not None]
        self.each(lambda dep: self.advance(wf, defn, dep, self.waiting_attempt(wf, dep)),
                  ready)
        if name in defn.sinks:
            self.maybe_complete(wf, defn, name)

    def waiting_attempt(self, wf: WorkflowRecord, name: str) -> int:
        """The attempt of ``name`` that waits for its upstreams: the first (a redrive's
        are later ones: engine/redrive.py)."""
        return 1

    def maybe_complete(self, wf: WorkflowRecord, defn: WorkflowDefinition, sink: str) -> None:
        wx = wf.workflow_exec_id
        if len(defn.sinks) > 1:
            self.store.delete_dependency(wx, END_NODE, sink)
            if self.store.pending_dependencies(wx, END_NODE):
                return
        self.complete_if_done(wf, defn)

    def complete_if_done(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool:
        """End the run COMPLETED if every activity's latest attempt COMPLETED — checked on
        the tables, never assumed from the sinks."""
        acts = self.store.list_activities(wf.workflow_exec_id)
        latest = latest_of(acts)
        # Every activity resolved (COMPLETED, or a failure its on_failure took over) and
        # nothing left running, map items and handlers included (contract/outcomes.py).
        open_ = open_activities(defn, latest)
        if open_:
            log.warning("workflow %s: sinks done but %s not COMPLETED; not completing",
                        wf.workflow_exec_id, ", ".join(open_))
            return False
        return self.end_workflow(wf, defn, [W.RUNNING], W.COMPLETED, activities=acts)

    def on_failure(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                   item: ActivityRecord) -> None:
        """Retry the failed attempt per its policy, or fail the workflow."""
        spec = defn.activity(item.activity_name)
        attempt = item.attempt
        if rules.retry_follows(spec, item):
            # The failure time is on the item, so every replay computes the same retry.
            failed_at = float(item.ended_epoch or item.updated_epoch)
            delay = spec.retry.delay_after(attempt, unit_random(item.activity_exec_id))
            not_before = failed_at + delay
            now = self.clock()
            nxt = self.new_attempt(wf, defn, item.activity_name, attempt + 1, now,
                                   not_before=not_before, previous=item)
            self.store.create_activity(nxt)
            if not_before <= now:
                self.advance(wf, defn, item.activity_name, attempt + 1)
            return
        why = f"activity {item.activity_name} {item.state} after {attempt} attempt(s)"
        if item.error:
            why += f": {item.error}"
        self.failed_for_good(wf, defn, item, why)

    def failed_for_good(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                        item: ActivityRecord, why: str) -> None:
        """An attempt failed with no retry left: the workflow fails (engine/handlers.py
        lets ``on_failure`` take over first)."""
        self.fail_workflow(wf, why)

    def new_attempt(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
                    attempt: int, now: float, *, not_before: float | None = None,
                    actor: str | None = None,
                    previous: ActivityRecord | None = None) -> ActivityRecord:
        """A REQUESTED attempt; with ``not_before`` its timer is armed so the sweep launches
        it when due (and finds it if we die before launching it). A retry carries what
        ``previous`` was given (its own input, its handler call)."""
        spec = defn.activity(name)
        return carry(ActivityRecord(
            workflow_exec_id=wf.workflow_exec_id,
            activity_exec_id=activity_exec_id(wf.workflow_exec_id, name, attempt),
            activity_name=name, workflow_name=wf.workflow_name, attempt=attempt,
            state=A.REQUESTED, workflow_version=wf.version, created_epoch=now,
            updated_epoch=now, heartbeat_timeout_seconds=spec.heartbeat_timeout_seconds,
            not_before_epoch=not_before, timer_epoch=not_before,
            history=(Change(A.REQUESTED.value, now, actor or self.actor),)), wf, previous)

    # -- moving an attempt on --------------------------------------------------------------

    def plan(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
             source: ActivityState) -> tuple[ActivityState, ...]:
        """How far this actor may move an attempt of ``name`` from ``source`` now."""
        spec = defn.activity(name)
        launching = spec.launcher.is_push and wf.state is W.RUNNING
        # REQUESTED -> QUEUED directly for a dependency-free attempt launched now (the
        # contract's own shortcut); READY first for everything else.
        steps: list[ActivityState] = (
            [A.READY] if source is A.REQUESTED and not (launching and not spec.depends_on)
            else [])
        if launching:
            steps.append(A.QUEUED)
            launcher = self.launchers.get(spec.launcher.kind)
            if launcher is not None and runs_in_process(launcher):
                steps.append(A.RUNNING)
        if source is A.QUEUED and not steps:
            return ()
        return tuple(s for s in steps if s is not source)

    def advance(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str, attempt: int,
                source: ActivityState = A.REQUESTED, *, first: bool = False) -> None:
        """Move an attempt on from ``source`` in one write: READY (pull), QUEUED and
        launched (push), or straight to RUNNING (in-process launchers). Only the winner of
        the write launches; a lost write means someone else moved it."""
        path = self.plan(wf, defn, name, source)
        if not path:
            return
        spec = defn.activity(name)
        aeid = activity_exec_id(wf.workflow_exec_id, name, attempt)
        now = self.clock()
        changes = rules.changes_for(spec, source, path[-1], now=now,
                                    workflow_name=wf.workflow_name,
                                    retention=self.retention(defn))
        if path[-1] is A.READY:
            changes = waits.ready_changes(spec, wf, now, changes)
        try:
            moved = self.move(aeid, source, path, changes)
        except StateConflict:
            return
        if path[-1] in (A.QUEUED, A.RUNNING):
            self.launch(wf, defn, moved)
        else:
            signals.after_ready(self, wf, defn, moved)

    def launch(self, wf: WorkflowRecord, defn: WorkflowDefinition,
               item: ActivityRecord) -> None:
        """Hand a QUEUED (or, in-process, RUNNING) attempt to its launcher; a launch that
        fails fails the attempt, with the error recorded."""
        spec = defn.activity(item.activity_name)
        launcher = self.launchers.get(spec.launcher.kind)
        request = LaunchRequest(
            activity_exec_id=item.activity_exec_id, activity_name=item.activity_name,
            workflow_exec_id=wf.workflow_exec_id, workflow_name=wf.workflow_name,
            attempt=item.attempt, config=dict(spec.launcher.config),
            endpoint_url=self.store.endpoint_url, table_prefix=self.store.table_prefix)
        try:
            if launcher is None:
                raise RuntimeError(
                    f"no {spec.launcher.kind!r} launcher is configured in this process")
            if item.state is A.RUNNING:
                # Moved straight to RUNNING for an in-process launcher: the run finds the
                # image remembered and the workflow item here, and reads nothing first.
                done: Future[WorkflowRecord] = Future()
                done.set_result(wf)
                self.prefetched_workflow(item.activity_exec_id, done)
            launcher.launch(request)
        except Exception as exc:  # any launch failure fails this attempt, recorded
            log.warning("launch of %s failed: %s", item.activity_exec_id, exc)
            self.fail_attempt(item, f"launch failed: {type(exc).__name__}: {exc}",
                              type(exc).__name__)

    def apply(self, item: ActivityRecord, transition: Transition, *,
              output: str | None = None, error: str | None = None,
              error_type: str | None = None, actor: str | None = None,
              claimed: bool = False) -> ActivityRecord:
        """Move an attempt by ``transition`` from the state ``item`` shows, then run the
        follow-ups. A move that ends the attempt reads the workflow item at the same time
        as it writes (one sequential round trip less per hand-off). ``claimed``: a claim,
        which takes the attempt only while it is in the claimable index.

        A lost write is retried from where the activity is now when the contract still
        allows the verb from there: a worker reporting COMPLETED while a cancel turned
        RUNNING into CANCELLED_RUNNING ends it CANCELLED rather than losing the report.
        Each retry follows a state change, and the contract has no cycles.

        Raises:
            StateConflict: the verb does not apply where the activity is now.
            WaitsForEvent: a move other than CANCEL asked of a wait (its own event ends
                it, in ``waits.end_wait``; nobody runs it).
        """
        defn = self.definition_of(item)
        spec = defn.activity(item.activity_name)
        waits.check_outside_move(spec, item, transition)
        ends = any(n.is_terminal for (s, t), n in ACTIVITY_TRANSITIONS.items()
                   if t is transition)
        wf_read = self.in_background(self.workflow, item.workflow_exec_id) if ends else None
        current: ActivityRecord = item
        try:
            while True:
                source = current.state
                target = ACTIVITY_TRANSITIONS.get((source, transition)) if source else None
                if source is None or target is None:
                    raise StateConflict(expected=[s.value for (s, t) in ACTIVITY_TRANSITIONS
                                                  if t is transition],
                                        actual=source.value if source else None,
                                        activity_exec_id=item.activity_exec_id,
                                        transition=transition.value, current=current)
                changes = rules.changes_for(
                    spec, source, target, now=self.clock(), workflow_name=item.workflow_name,
                    retention=self.retention(defn), output=output,
                    error=clip_error(error), error_type=error_type)
                try:
                    moved = self.move(item.activity_exec_id, source, (target,), changes,
                                      actor=actor, claimed=claimed)
                    break
                except StateConflict as lost:
                    if lost.current is None or lost.current.state == source:
                        raise
                    current = lost.current
                    self.remember(current)
        except BaseException:
            if wf_read is not None:
                wf_read.cancel()
            raise
        self.after(moved, wf_read)
        return moved

    def fail_attempt(self, item: ActivityRecord, error: str, error_type: str | None) -> None:
        """FAILED (from QUEUED/PREPARING/RUNNING) with its follow-ups; quiet if it moved on."""
        try:
            self.apply(item, Transition.FAILED, error=error, error_type=error_type)
        except WhimbrelError as exc:
            log.info("%s not failed: %s", item.activity_exec_id, exc)

    def relaunch_ready(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                       items: Sequence[ActivityRecord]) -> None:
        """Move on READY push attempts whose mover died before queueing them."""
        for act in items:
            if act.state is A.READY and defn.activity(act.activity_name).launcher.is_push:
                self.advance(wf, defn, act.activity_name, act.attempt, A.READY)

