"""Hand-offs (part of the core): what follows an activity's end (dependents readied and
launched, retries, the workflow's completion), and moving one attempt as far as its
actor may.

Moves made in one write (docs/contract.md): an actor makes, in one conditional write,
consecutive moves that nobody else can make in between — a push activity whose last
upstream just completed goes REQUESTED → READY → QUEUED, and, for an in-process
launcher, on to RUNNING. Each state still lands in the item's history. This module
decides the moves (``plan``) and what follows them; ``writing.py`` writes them.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import StoreError, WhimbrelError
from whimbrel.contract.ids import END_NODE, activity_exec_id, unit_random
from whimbrel.contract.outcomes import HANDED_BACK, carry, open_activities
from whimbrel.contract.records import ActivityRecord, Change, WorkflowRecord, latest_of
from whimbrel.contract.states import (
    ACTIVITY_FAILED,
    ACTIVITY_TRANSITIONS,
    WORKFLOW_LIVE,
    WORKFLOW_PROCEEDING,
    ActivityState,
    Transition,
    WorkflowState,
)
from whimbrel.engine import rules
from whimbrel.engine.admission import (
    leaves_for_worker,
    unpromise,
)
from whimbrel.engine.feature import Core, Feature, RunRead, RunRows
from whimbrel.engine.ports import runs_in_process
from whimbrel.engine.writing import write_path, write_verb

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState


def proceeds(wf: WorkflowRecord) -> bool:
    """Whether a run's follow-ups go on (it is neither ending nor over); ``plan``
    decides how far each attempt then moves."""
    return wf.state in WORKFLOW_PROCEEDING


class Flow:
    """Hand-offs: what follows an attempt's end, retries, advancing an attempt, and
    applying one move. A part of the engine: ``engine.flow.op(…)``."""

    def __init__(self, core: Core) -> None:
        self.core = core

    # -- follow-ups -----------------------------------------------------------------------

    def after(self, item: ActivityRecord,
              wf_read: Future[WorkflowRecord] | None = None) -> None:
        """Follow-ups of the state ``item`` is now in. Idempotent.

        ``wf_read`` is a read of the workflow item started together with the move (it
        saves a sequential round trip on every hand-off). A feature may take the follow-ups
        over (``Feature.follow_up``: a map's item, an attempt from before a redrive); every
        feature then sees the move (``Feature.moved``).
        """
        run = RunRead(lambda: self.core.reads.workflow(item.workflow_exec_id), wf_read)
        try:
            if not self.core.hooks.take_over(Feature.follow_up, item, run):
                self.follow_up(item, run)
            self.core.hooks.observe(Feature.moved, item)
        except StoreError as exc:
            self.visit_soon(item.workflow_exec_id, f"follow-up of {item.activity_exec_id}: {exc}")
            raise

    def visit_soon(self, wx: str, why: str) -> None:
        """A follow-up failed half-way (e.g. throttled past the store's retries): move the
        run's reconcile visit to now, so the next sweep re-derives what is missing instead
        of waiting for the visit scheduled at the start. Best effort: one small write to
        the run's item; if it fails too, the visit already scheduled still comes."""
        self.core.incidents.count("followup_failed")
        log.warning("%s: its run's reconcile visit moved to now", why)
        try:
            # Only a live run is visited: an ended one must stay out of the reconcile index.
            self.core.store.set_workflow(wx, {"check_epoch": self.core.clock()},
                                         states=WORKFLOW_LIVE)
        except WhimbrelError as exc:
            log.warning("reconcile visit of %s not moved: %s", wx, exc)

    def follow_up(self, item: ActivityRecord, run: RunRead) -> None:
        """The core's follow-ups of an ended attempt: its dependents, its retry, or the
        workflow's failure."""
        wf = self.run_going_on(item, run)
        if wf is None:
            return
        state = item.state
        defn = self.core.definitions.definition_of(wf)
        if state is A.COMPLETED:
            self.after_completed(wf, defn, item.activity_name)
        elif state in ACTIVITY_FAILED:
            self.on_failure(wf, defn, item)
        else:
            # CANCELLED while the workflow runs: nothing downstream can ever run, and a
            # cancel is a request to stop, not a fault: the run is cancelled (it ends
            # CANCELLED once nothing runs; a failure that came first keeps it FAILED).
            self.core.ending.cancel(wf.workflow_exec_id, refuse_ended=False)

    def run_going_on(self, item: ActivityRecord, run: RunRead) -> WorkflowRecord | None:
        """The run of an attempt that just ended, when its follow-ups apply; None when
        it has not ended, or its run is failing, cancelled or over (then it is settled)."""
        state = item.state
        if state is None or not state.is_terminal:
            run.cancel()
            return None
        wf = run.get()
        if not proceeds(wf):
            # failing, cancelled, or a straggler of an end
            self.core.ending.settle(wf.workflow_exec_id)
            return None
        return wf

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
                self.core.store.delete_dependency(wx, dep, name)
                if self.core.store.pending_dependencies(wx, dep):
                    return None
            return dep

        ready = [d for d in self.core.threads.each(release, defn.dependents(name)) if d is not None]
        rows = self.rows(wx)  # one listing for every dependent a `when` decides
        self.core.threads.each(
            lambda dep: self.advance(wf, defn, dep, self.waiting_attempt(wf, dep), rows=rows),
            ready)
        if name in defn.sinks:
            self.maybe_complete(wf, defn, name)
        self.core.hooks.observe(Feature.completed, wf, defn, name)

    def waiting_attempt(self, wf: WorkflowRecord, name: str) -> int:
        """The attempt of ``name`` that waits for its upstreams: the first (a redrive's
        are later ones: engine/redrive.py)."""
        attempt = self.core.hooks.first_answer(Feature.waiting_attempt, wf, name)
        return 1 if attempt is None else attempt

    def maybe_complete(self, wf: WorkflowRecord, defn: WorkflowDefinition, sink: str) -> None:
        wx = wf.workflow_exec_id
        if len(defn.sinks) > 1:
            self.core.store.delete_dependency(wx, END_NODE, sink)
            if self.core.store.pending_dependencies(wx, END_NODE):
                return
        self.complete_if_done(wf, defn)

    def complete_if_done(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool:
        """End the run COMPLETED if every activity's latest attempt COMPLETED — checked on
        the tables, never assumed from the sinks."""
        acts = self.core.store.list_activities(wf.workflow_exec_id)
        latest = latest_of(acts)
        # Every activity resolved (COMPLETED, or a failure its on_failure took over) and
        # nothing left running, map items and handlers included (contract/outcomes.py).
        open_ = open_activities(defn, latest)
        if open_:
            log.warning("workflow %s: sinks done but %s not COMPLETED; not completing",
                        wf.workflow_exec_id, ", ".join(open_))
            return False
        return self.core.ending.end_workflow(wf, defn, [W.RUNNING], W.COMPLETED, activities=acts)

    def on_failure(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                   item: ActivityRecord) -> None:
        """An attempt ended unsuccessfully: a feature may take it over first (a map never
        retries as a whole), else its retry policy applies."""
        if not self.core.hooks.take_over(Feature.before_retry, wf, defn, item):
            self.retry_or_fail(wf, defn, item)

    def retry_or_fail(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                      item: ActivityRecord) -> None:
        """Retry the failed attempt per its policy, or fail the workflow."""
        spec = defn.activity(item.activity_name)
        attempt = item.attempt
        if rules.retry_follows(spec, item):
            # The failure time is on the item, so every replay computes the same retry.
            failed_at = float(item.ended_epoch or item.updated_epoch)
            delay = 0.0 if item.error_type == HANDED_BACK else spec.retry.delay_after(
                attempt, unit_random(item.activity_exec_id))
            not_before = failed_at + delay
            now = self.core.clock()
            nxt = self.new_attempt(wf, defn, item.activity_name, attempt + 1, now,
                                   not_before=not_before, previous=item)
            self.core.store.create_activity(nxt)
            # Say the retry's row exists (only while the attempt is still where we saw it):
            # from now on a missing row of it was lost, never created again (engine/lost.py).
            if item.retry_created is None and item.state is not None:
                self.core.store.try_set_activity(item.activity_exec_id,
                                              {"retry_created": attempt + 1}, states=[item.state])
            if not_before <= now:
                self.advance(wf, defn, item.activity_name, attempt + 1)
            return
        why = f"activity {item.activity_name} {item.state} after {attempt} attempt(s)"
        if item.error:
            why += f": {item.error}"
        self.failed_for_good(wf, defn, item, why)

    def failed_for_good(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                        item: ActivityRecord, why: str) -> None:
        """An attempt failed with no retry left: the workflow fails (a feature may take it
        over first: engine/handlers.py, ``on_failure``)."""
        if not self.core.hooks.take_over(Feature.failed_for_good, wf, defn, item, why):
            self.core.ending.fail_workflow(wf, why)

    def new_attempt(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
                    attempt: int, now: float, *, not_before: float | None = None,
                    actor: str | None = None,
                    previous: ActivityRecord | None = None) -> ActivityRecord:
        """A REQUESTED attempt; with ``not_before`` its timer is armed so the sweep launches
        it when due (and finds it if we die before launching it). A retry carries what
        ``previous`` was given (its own input, its handler call)."""
        spec = defn.activity(name)
        record = carry(ActivityRecord(
            workflow_exec_id=wf.workflow_exec_id,
            activity_exec_id=activity_exec_id(wf.workflow_exec_id, name, attempt),
            activity_name=name, workflow_name=wf.workflow_name, attempt=attempt,
            state=A.REQUESTED, workflow_version=wf.version, created_epoch=now,
            updated_epoch=now, heartbeat_timeout_seconds=spec.heartbeat_timeout_seconds,
            not_before_epoch=not_before, timer_epoch=not_before, traceparent=wf.traceparent,
            history=(Change(A.REQUESTED.value, now, actor or self.core.actor),)), wf, previous)
        return self.core.hooks.shape(Feature.new_attempt, defn, record)

    # -- moving an attempt on --------------------------------------------------------------

    def plan(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
             source: ActivityState, *, take: bool = False) -> tuple[ActivityState, ...]:
        """How far this actor may move an attempt of ``name`` from ``source`` now
        (``take``: the move follows, so a thread is promised to its launch)."""
        spec = defn.activity(name)
        # Code this process is no worker for waits READY for one (engine/handover.py).
        launching = spec.launcher.is_push and wf.state is W.RUNNING \
            and not leaves_for_worker(self.core, spec, launch=take)
        # REQUESTED -> QUEUED directly for a dependency-free attempt launched now (the
        # contract's own shortcut); READY first for everything else.
        steps: list[ActivityState] = (
            [A.READY] if source is A.REQUESTED and not (launching and not spec.depends_on)
            else [])
        if launching:
            steps.append(A.QUEUED)
            launcher = self.core.launchers.get(spec.launcher.kind)
            if launcher is not None and runs_in_process(launcher):
                steps.append(A.RUNNING)
        if source is A.QUEUED and not steps:
            return ()
        return tuple(s for s in steps if s is not source)

    def advance(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
                attempt: int, source: ActivityState = A.REQUESTED, *,
                rows: RunRows | None = None) -> None:
        """Move an attempt on from ``source`` in one write: READY (pull), QUEUED and
        launched (push), or straight to RUNNING (in-process launchers). Only the winner of
        the write launches; a lost write means someone else moved it. A feature may take
        the move over (``Feature.advance``: a map expands; a ``when`` decides, from
        ``rows`` when the caller shares one listing among several attempts)."""
        rows = rows or self.rows(wf.workflow_exec_id)
        if self.core.hooks.take_over(Feature.advance, wf, defn, name, attempt, source, rows):
            return
        path = self.plan(wf, defn, name, source, take=True)
        if not path:
            return
        if not write_path(self.core, wf, defn, name, attempt, source, path) \
                and A.RUNNING in path:
            unpromise(self.core, defn.activity(name))  # the thread ``plan`` promised it

    def rows(self, wx: str) -> RunRows:
        """The run's attempt rows, listed when first asked (never, if nothing needs them)."""
        return RunRows(lambda: self.core.store.list_activities(wx))

    def apply(self, item: ActivityRecord, transition: Transition, *,
              output: str | None = None, error: str | None = None,
              error_type: str | None = None, actor: str | None = None,
              claimed: bool = False, written_epoch: float | None = None) -> ActivityRecord:
        """Move an attempt by ``transition`` from the state ``item`` shows, then run the
        follow-ups. A move that ends the attempt reads the workflow item at the same time
        as it writes (one sequential round trip less per hand-off). ``claimed``: a claim,
        which takes the attempt only while it is in the claimable index.

        A running attempt's result counts only if written before its deadline: at
        ``written_epoch`` (a row's stream record time), else now (engine/written.py). One
        written later times the attempt out, and the StateConflict raised names TIMED_OUT.

        A lost write is retried from where the activity is now when the contract still
        allows the verb from there: a worker reporting COMPLETED while a cancel turned
        RUNNING into CANCELLED_RUNNING ends it CANCELLED rather than losing the report.
        Each retry follows a state change, and the contract has no cycles.

        Raises:
            StateConflict: the verb does not apply where the activity is now.
            WhimbrelError: a feature refuses the move (``WaitsForEvent``: a move other
                than CANCEL asked of a wait, which only its own event ends).
        """
        defn = self.core.definitions.definition_of(item)
        spec = defn.activity(item.activity_name)
        self.core.hooks.observe(Feature.refuse, spec, item, transition)
        ends = any(n.is_terminal for (s, t), n in ACTIVITY_TRANSITIONS.items()
                   if t is transition)
        ahead = ends and not self.core.hooks.take_over(Feature.reads_run_after, item, defn,
                                                       transition)
        wf_read = self.core.threads.in_background(self.core.reads.workflow, item.workflow_exec_id) \
            if ahead else None
        try:
            moved = write_verb(self.core, defn, spec, item, transition, output=output,
                               error=error, error_type=error_type, actor=actor,
                               claimed=claimed, written_epoch=written_epoch)
        except BaseException:
            if wf_read is not None:
                wf_read.cancel()
            raise
        self.after(moved, wf_read)
        return moved
