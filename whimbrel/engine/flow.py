"""Hand-offs (part of the core): what follows an activity's end (dependents readied and
launched, retries, the workflow's completion), and moving one attempt as far as its
actor may.

Moves made in one write (docs/contract.md): an actor makes, in one conditional write,
consecutive moves that nobody else can make in between — a push activity whose last
upstream just completed goes REQUESTED → READY → QUEUED, and, for an in-process
launcher, on to RUNNING. Each state still lands in the item's history.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import StateConflict, StoreError, WhimbrelError
from whimbrel.contract.ids import END_NODE, activity_exec_id, unit_random
from whimbrel.contract.outcomes import HANDED_BACK, carry, open_activities
from whimbrel.contract.payloads import clip_error
from whimbrel.contract.records import ActivityRecord, Change, WorkflowRecord, latest_of
from whimbrel.contract.states import (
    ACTIVITY_FAILED,
    ACTIVITY_NOT_LAUNCHED,
    ACTIVITY_STARTING,
    ACTIVITY_TRANSITIONS,
    WORKFLOW_LIVE,
    WORKFLOW_PROCEEDING,
    ActivityState,
    Transition,
    WorkflowState,
)
from whimbrel.engine import ending, launches, rules, written
from whimbrel.engine.admission import admission, leaves_for_worker, ready_changes, starts
from whimbrel.engine.feature import Admission, Core, RunRead
from whimbrel.engine.ports import runs_in_process

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState


# -- follow-ups -----------------------------------------------------------------------


def after(engine: Core, item: ActivityRecord,
          wf_read: Future[WorkflowRecord] | None = None) -> None:
    """Follow-ups of the state ``item`` is now in. Idempotent.

    ``wf_read`` is a read of the workflow item started together with the move (it
    saves a sequential round trip on every hand-off). A feature may take the follow-ups
    over (``Feature.follow_up``: a map's item, an attempt from before a redrive); every
    feature then sees the move (``Feature.moved``).
    """
    run = RunRead(lambda: engine.workflow(item.workflow_exec_id), wf_read)
    try:
        if not any(f.follow_up(item, run) for f in engine.features):
            follow_up(engine, item, run)
        for feature in engine.features:
            feature.moved(item)
    except StoreError as exc:
        visit_soon(engine, item.workflow_exec_id, f"follow-up of {item.activity_exec_id}: {exc}")
        raise


def visit_soon(engine: Core, wx: str, why: str) -> None:
    """A follow-up failed half-way (e.g. throttled past the store's retries): move the
    run's reconcile visit to now, so the next sweep re-derives what is missing instead
    of waiting for the visit scheduled at the start. Best effort: one small write to
    the run's item; if it fails too, the visit already scheduled still comes."""
    engine.incidents.count("followup_failed")
    log.warning("%s: its run's reconcile visit moved to now", why)
    try:
        # Only a live run is visited: an ended one must stay out of the reconcile index.
        engine.store.set_workflow(wx, {"check_epoch": engine.clock()}, states=WORKFLOW_LIVE)
    except WhimbrelError as exc:
        log.warning("reconcile visit of %s not moved: %s", wx, exc)


def follow_up(engine: Core, item: ActivityRecord, run: RunRead) -> None:
    """The core's follow-ups of an ended attempt: its dependents, its retry, or the
    workflow's failure."""
    wf = run_going_on(engine, item, run)
    if wf is None:
        return
    state = item.state
    defn = engine.definition_of(wf)
    if state is A.COMPLETED:
        after_completed(engine, wf, defn, item.activity_name)
    elif state in ACTIVITY_FAILED:
        on_failure(engine, wf, defn, item)
    else:
        # CANCELLED while the workflow runs: nothing downstream can ever run, and a
        # cancel is a request to stop, not a fault: the run is cancelled (it ends
        # CANCELLED once nothing runs; a failure that came first keeps it FAILED).
        ending.cancel(engine, wf.workflow_exec_id)


def run_going_on(engine: Core, item: ActivityRecord, run: RunRead) -> WorkflowRecord | None:
    """The run of an attempt that just ended, when its follow-ups apply; None when
    it has not ended, or its run is failing, cancelled or over (then it is settled)."""
    state = item.state
    if state is None or not state.is_terminal:
        run.cancel()
        return None
    wf = run.get()
    if not proceeds(wf):
        ending.settle(engine, wf.workflow_exec_id)  # failing, cancelled, or a straggler of an end
        return None
    return wf


def proceeds(wf: WorkflowRecord) -> bool:
    """Whether a run's follow-ups go on (it is neither ending nor over); ``plan``
    decides how far each attempt then moves."""
    return wf.state in WORKFLOW_PROCEEDING


def after_completed(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
                    name: str) -> None:
    """Ready (and launch) the dependents whose upstreams all completed; complete the
    workflow when ``name`` was its last sink."""
    wx = wf.workflow_exec_id

    def release(dep: str) -> str | None:
        if len(defn.activity(dep).depends_on) > 1:
            # Delete our edge, then look for any edge left. Of two upstreams that
            # finish together at least one sees none left (each deletes before it
            # reads); both may, and then the move's condition picks one winner.
            engine.store.delete_dependency(wx, dep, name)
            if engine.store.pending_dependencies(wx, dep):
                return None
        return dep

    ready = [d for d in engine.each(release, defn.dependents(name)) if d is not None]
    engine.each(lambda dep: advance(engine, wf, defn, dep, waiting_attempt(engine, wf, dep)),
                ready)
    if name in defn.sinks:
        maybe_complete(engine, wf, defn, name)
    for feature in engine.features:
        feature.completed(wf, defn, name)


def waiting_attempt(engine: Core, wf: WorkflowRecord, name: str) -> int:
    """The attempt of ``name`` that waits for its upstreams: the first (a redrive's
    are later ones: engine/redrive.py)."""
    for feature in engine.features:
        attempt = feature.waiting_attempt(wf, name)
        if attempt is not None:
            return attempt
    return 1


def maybe_complete(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition, sink: str) -> None:
    wx = wf.workflow_exec_id
    if len(defn.sinks) > 1:
        engine.store.delete_dependency(wx, END_NODE, sink)
        if engine.store.pending_dependencies(wx, END_NODE):
            return
    complete_if_done(engine, wf, defn)


def complete_if_done(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool:
    """End the run COMPLETED if every activity's latest attempt COMPLETED — checked on
    the tables, never assumed from the sinks."""
    acts = engine.store.list_activities(wf.workflow_exec_id)
    latest = latest_of(acts)
    # Every activity resolved (COMPLETED, or a failure its on_failure took over) and
    # nothing left running, map items and handlers included (contract/outcomes.py).
    open_ = open_activities(defn, latest)
    if open_:
        log.warning("workflow %s: sinks done but %s not COMPLETED; not completing",
                    wf.workflow_exec_id, ", ".join(open_))
        return False
    return ending.end_workflow(engine, wf, defn, [W.RUNNING], W.COMPLETED, activities=acts)


def on_failure(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
               item: ActivityRecord) -> None:
    """An attempt ended unsuccessfully: a feature may take it over first (a map never
    retries as a whole), else its retry policy applies."""
    if not any(f.before_retry(wf, defn, item) for f in engine.features):
        retry_or_fail(engine, wf, defn, item)


def retry_or_fail(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
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
        now = engine.clock()
        nxt = new_attempt(engine, wf, defn, item.activity_name, attempt + 1, now,
                               not_before=not_before, previous=item)
        engine.store.create_activity(nxt)
        # Say the retry's row exists (only while the attempt is still where we saw it):
        # from now on a missing row of it was lost, never created again (engine/lost.py).
        if item.retry_created is None and item.state is not None:
            engine.store.try_set_activity(item.activity_exec_id,
                                          {"retry_created": attempt + 1}, states=[item.state])
        if not_before <= now:
            advance(engine, wf, defn, item.activity_name, attempt + 1)
        return
    why = f"activity {item.activity_name} {item.state} after {attempt} attempt(s)"
    if item.error:
        why += f": {item.error}"
    failed_for_good(engine, wf, defn, item, why)


def failed_for_good(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
                    item: ActivityRecord, why: str) -> None:
    """An attempt failed with no retry left: the workflow fails (a feature may take it
    over first: engine/handlers.py, ``on_failure``)."""
    if not any(f.failed_for_good(wf, defn, item, why) for f in engine.features):
        ending.fail_workflow(engine, wf, why)


def new_attempt(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
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
        history=(Change(A.REQUESTED.value, now, actor or engine.actor),)), wf, previous)
    for feature in engine.features:
        record = feature.new_attempt(defn, record)
    return record

# -- moving an attempt on --------------------------------------------------------------


def plan(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
         source: ActivityState) -> tuple[ActivityState, ...]:
    """How far this actor may move an attempt of ``name`` from ``source`` now."""
    spec = defn.activity(name)
    # Code this process is no worker for waits READY for one (engine/handover.py).
    launching = spec.launcher.is_push and wf.state is W.RUNNING \
        and not leaves_for_worker(engine, spec)
    # REQUESTED -> QUEUED directly for a dependency-free attempt launched now (the
    # contract's own shortcut); READY first for everything else.
    steps: list[ActivityState] = (
        [A.READY] if source is A.REQUESTED and not (launching and not spec.depends_on)
        else [])
    if launching:
        steps.append(A.QUEUED)
        launcher = engine.launchers.get(spec.launcher.kind)
        if launcher is not None and runs_in_process(launcher):
            steps.append(A.RUNNING)
    if source is A.QUEUED and not steps:
        return ()
    return tuple(s for s in steps if s is not source)


def advance(engine: Core, wf: WorkflowRecord, defn: WorkflowDefinition, name: str,
            attempt: int, source: ActivityState = A.REQUESTED) -> None:
    """Move an attempt on from ``source`` in one write: READY (pull), QUEUED and
    launched (push), or straight to RUNNING (in-process launchers). Only the winner of
    the write launches; a lost write means someone else moved it. A feature may take
    the move over (``Feature.advance``: a map expands)."""
    if any(f.advance(wf, defn, name, attempt, source) for f in engine.features):
        return
    path = plan(engine, wf, defn, name, source)
    if not path:
        return
    spec = defn.activity(name)
    aeid = activity_exec_id(wf.workflow_exec_id, name, attempt)
    now = engine.clock()
    changes = rules.changes_for(spec, source, path[-1], now=now,
                                workflow_name=wf.workflow_name,
                                retention=engine.retention(defn))
    if path[-1] is A.READY:
        changes = ready_changes(engine, spec, wf, now, changes)
    ask: Admission | None = None
    if source in ACTIVITY_NOT_LAUNCHED and starts(path, changes):
        # A pool may hold it READY, out of the claimable index (engine/pools.py).
        item = ActivityRecord(wf.workflow_exec_id, aeid, name, wf.workflow_name, attempt,
                              source, workflow_version=wf.version)
        ask = admission(engine, wf, defn, item, changes)
        if ask is not None and not ask.go:
            path = (A.READY,) if source is A.REQUESTED else ()
            changes = ready_changes(engine, spec, wf, now, rules.changes_for(
                spec, source, A.READY, now=now, workflow_name=wf.workflow_name,
                retention=engine.retention(defn))) if path else {}
        if ask is not None:
            changes = {**changes, **ask.changes}
        if ask is not None and not path:  # held where it is: nothing to write
            ask.landed(item)
            return
    try:
        moved = engine.move(aeid, source, path, changes)
    except StateConflict as lost:
        if ask is not None:
            ask.lost(lost.current)  # what the admission took is given back
        return
    if ask is not None:
        ask.landed(moved)
    if path[-1] in ACTIVITY_STARTING:
        launches.launch(engine, wf, defn, moved)
    else:
        for feature in engine.features:
            feature.readied(wf, defn, moved)


def apply(engine: Core, item: ActivityRecord, transition: Transition, *,
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
    defn = engine.definition_of(item)
    spec = defn.activity(item.activity_name)
    for feature in engine.features:
        feature.refuse(spec, item, transition)
    ends = any(n.is_terminal for (s, t), n in ACTIVITY_TRANSITIONS.items()
               if t is transition)
    ahead = ends and not any(f.reads_run_after(item, defn, transition)
                             for f in engine.features)
    wf_read = engine.in_background(engine.workflow, item.workflow_exec_id) if ahead else None
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
            now = engine.clock()
            changes = rules.changes_for(
                spec, source, target, now=now, workflow_name=item.workflow_name,
                retention=engine.retention(defn), output=output,
                error=clip_error(error), error_type=error_type)
            at = (written_epoch if written_epoch is not None else now) \
                if written.judged(source, transition) else None
            try:
                moved = engine.move(item.activity_exec_id, source, (target,), changes,
                                    actor=actor, claimed=claimed, written_by=at)
                break
            except StateConflict as lost:
                if at is not None and lost.current is not None \
                        and lost.current.state == source and written.came_late(lost.current, at):
                    current, timed_out = written.time_out_late(engine, defn, lost.current, at)
                    if timed_out:
                        after(engine, current)
                    continue
                if lost.current is None or lost.current.state == source:
                    raise
                current = lost.current
                engine.remember(current)
    except BaseException:
        if wf_read is not None:
            wf_read.cancel()
        raise
    after(engine, moved, wf_read)
    return moved
