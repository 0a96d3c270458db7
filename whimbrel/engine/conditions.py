"""Conditions (a feature, issue 22): ``when``, ``trigger``, skips, and ending a run early.

* **Deciding.** When an attempt would become READY or QUEUED (its upstreams all resolved:
  the fan-in edges are consumed by a SKIPPED upstream as by a completed one), this feature
  takes the advance over in a definition that has any ``when``: it asks
  :func:`whimbrel.contract.conditions.decide` how the upstreams count under the
  activity's ``trigger``, then evaluates its ``when`` over the document
  ``{"input": <run input>, "<upstream>": <output>}``. False, or an upstream SKIPPED under
  ``all_completed`` (all SKIPPED under ``none_failed``), ends the attempt SKIPPED in one
  conditional write (``REQUESTED → SKIPPED``), and its follow-ups are those of a
  completion: its dependents are decided in turn, and a SKIPPED sink ends the run as a
  completed one does. A ``when`` that fails on the document (any error of the
  expression: contract/conditions.py turns each into ``ExpressionFailed``) fails the
  attempt (``REQUESTED → READY → QUEUED → FAILED`` in one write, error type
  :data:`CONDITION_ERROR`), and its retry policy applies.
* **Ending early.** ``Conditions.end_early`` first claims the run's end (:func:`claim_end`: of
  two at once one wins; the other's report is a plain completion), then completes the
  RUNNING attempt with ``ends_workflow`` set (one conditional write). Its follow-up
  ends the run COMPLETED with that output (``output`` and ``ended_by`` on the workflow
  item) and keeps a check time on it; the run's ``after_end`` skips every attempt not
  launched (REQUESTED, READY) and asks the others to stop as a cancel does (a running
  one learns it from its next heartbeat). A redelivery finds the attempt COMPLETED with
  the flag and redoes only the follow-ups; a crash between the writes is repaired by the
  reconcile visit (of the live run, or of the ended run that still carries its check
  time), or by the claimer's retry (its claim is its own again).
"""

from __future__ import annotations

import logging
from typing import Any

from whimbrel.contract import conditions as cond
from whimbrel.contract.dataflow import handlers, split_item
from whimbrel.contract.definitions import ActivityDefinition, WorkflowDefinition
from whimbrel.contract.errors import IllegalTransition, InvalidInput, StateConflict
from whimbrel.contract.ids import END_NODE, activity_exec_id
from whimbrel.contract.outcomes import failed_for_good, resolution
from whimbrel.contract.payloads import clip_error, decode_payload
from whimbrel.contract.records import ActivityRecord, WorkflowRecord, latest_of
from whimbrel.contract.states import (
    ACTIVITY_NOT_LAUNCHED,
    ActivityState,
    Transition,
    WorkflowState,
    activity_path,
)
from whimbrel.engine import rules, written
from whimbrel.engine.feature import Core, Feature, RunRead, RunRows

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState
O = cond.Outcome  # noqa: E741

#: The error type of an attempt whose ``when`` failed on its document.
CONDITION_ERROR = cond.CONDITION_ERROR


class EngineOnlySkip(IllegalTransition):
    """SKIP asked for by a caller: only the engine skips an attempt."""

    def __init__(self, *, current: str, activity_exec_id: str | None = None) -> None:
        super().__init__(current=current, transition=Transition.SKIP.value,
                         activity_exec_id=activity_exec_id)
        self.message = (f"SKIP is made only by the engine (refused for "
                        f"{activity_exec_id or 'the activity'}, which is {current}): an "
                        "activity is skipped by its `when`, or by a run ended early")


def outcome(defn: WorkflowDefinition, latest: dict[str, ActivityRecord], name: str) -> O:
    """How upstream ``name`` counts for its dependents now."""
    res = resolution(defn, latest, name)
    if res is not None:
        return O.SKIPPED if res.skipped else O.COMPLETED
    act = latest.get(name)
    if act is None or act.state is None or not act.state.is_terminal:
        return O.PENDING
    if act.state is A.CANCELLED or failed_for_good(act, defn.activity(name)):
        return O.FAILED
    return O.PENDING  # a retry follows


class Conditions(Feature):
    """``when`` and ``trigger`` decide each attempt before it is released; skips
    propagate; an attempt may end its run early."""

    def __init__(self, core: Core) -> None:
        self.core = core

    # -- deciding --------------------------------------------------------------------------

    def advance(self, wf: WorkflowRecord, defn: WorkflowDefinition, name: str, attempt: int,
                source: ActivityState, rows: RunRows) -> bool:
        spec = defn.activity(name)
        # Only a first release is decided (READY was decided already); map items and
        # failure handlers never are; a definition without `when` never skips anything.
        if source is not A.REQUESTED or split_item(name)[1] is not None \
                or name in handlers(defn) or not (spec.when or spec.depends_on) \
                or not any(a.when is not None for a in defn.activities):
            return False
        wx = wf.workflow_exec_id
        records = rows.get()  # listed once for all a completion releases
        latest = latest_of(records)
        decision = cond.decide(spec.trigger, [outcome(defn, latest, d) for d in spec.depends_on])
        if decision is cond.Decision.WAIT:
            return True  # a failed upstream: the run's failure path ends this one
        if decision is cond.Decision.RUN:
            if spec.when is None:
                return False
            outputs, _ = self.core.inputs.upstream_values(wx, defn, name, records)
            try:
                doc = cond.document(decode_payload(self.core.reads.run_input(wf), field="input"),
                                   outputs)
                if cond.evaluate_when(spec.when, doc):
                    return False
            except InvalidInput as exc:
                self.fail(wf, defn, spec, name, attempt, str(exc))
                return True
        self.skip(wf, defn, spec, activity_exec_id(wx, name, attempt), source)
        return True

    def skip(self, wf: WorkflowRecord, defn: WorkflowDefinition, spec: ActivityDefinition,
             aeid: str, source: ActivityState, *, follow: bool = True) -> bool:
        """``source → SKIPPED`` in one write (on ``state = source``: a lost write means
        someone else moved it); then, unless told not to, its follow-ups."""
        changes = rules.changes_for(spec, source, A.SKIPPED, now=self.core.clock(),
                                    workflow_name=wf.workflow_name,
                                    retention=self.core.definitions.retention(defn))
        try:
            moved = self.core.known.move(aeid, source, (A.SKIPPED,), changes)
        except StateConflict:
            return False
        if follow:
            self.core.flow.after(moved)
        return True

    def fail(self, wf: WorkflowRecord, defn: WorkflowDefinition, spec: ActivityDefinition,
             name: str, attempt: int, why: str) -> None:
        """The ``when`` failed on this document: the attempt fails (it never launched)."""
        aeid = activity_exec_id(wf.workflow_exec_id, name, attempt)
        path = activity_path(A.REQUESTED, Transition.READY, Transition.QUEUED,
                             Transition.FAILED)
        changes = rules.changes_for(spec, A.REQUESTED, A.FAILED, now=self.core.clock(),
                                    workflow_name=wf.workflow_name,
                                    retention=self.core.definitions.retention(defn),
                                    error=clip_error(why), error_type=CONDITION_ERROR)
        try:
            moved = self.core.known.move(aeid, A.REQUESTED, path, changes)
        except StateConflict:
            return
        self.core.flow.after(moved)

    def refuse(self, spec: ActivityDefinition, item: ActivityRecord,
               verb: Transition) -> None:
        if verb is Transition.SKIP:
            raise EngineOnlySkip(current=str(item.state or A.REQUESTED),
                                 activity_exec_id=item.activity_exec_id)

    # -- after a move ----------------------------------------------------------------------

    def follow_up(self, item: ActivityRecord, run: RunRead) -> bool:
        if item.state is A.SKIPPED:
            wf = self.core.flow.run_going_on(item, run)
            if wf is not None:  # its dependents are decided, its end edge consumed
                self.core.flow.after_completed(wf, self.core.definitions.definition_of(wf),
                                               item.activity_name)
            return True
        if item.state is A.COMPLETED and item.ends_workflow:
            self.end_run(item, run.get())
            return True
        return False

    # -- ending early ----------------------------------------------------------------------

    def end_run(self, item: ActivityRecord, wf: WorkflowRecord) -> None:
        """End ``item``'s run COMPLETED with its output (idempotent)."""
        defn = self.core.definitions.definition_of(wf)
        if wf.state is W.RUNNING:
            self.drop_edges(wf, defn)  # nobody will consume them now
            self.core.ending.end_workflow(wf, defn, [W.RUNNING], W.COMPLETED,
                                extra={"output": item.output or "null",
                                       "ended_by": item.activity_exec_id})
        elif wf.state is W.COMPLETED and wf.ended_by == item.activity_exec_id:
            if wf.check_epoch is not None:  # a redelivery after a crash: finish it
                self.core.ending.after_end(wf)
        elif wf.state is not W.SUSPENDED:  # SUSPENDED: ended by the visit after RESUME
            self.core.ending.settle(wf.workflow_exec_id)

    def drop_edges(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> None:
        wx = wf.workflow_exec_id
        targets = [a.name for a in defn.activities if len(a.depends_on) > 1]
        if len(defn.sinks) > 1:
            targets.append(END_NODE)
        for down in targets:
            for up in self.core.store.pending_dependencies(wx, down, limit=None):
                self.core.store.delete_dependency(wx, down, up)

    def check_at_end(self, wf: WorkflowRecord, now: float) -> float | None:
        # Visited again until its after_end has skipped what it left unstarted.
        return now + self.core.reconcile_grace_seconds if wf.ended_by else None

    def after_end(self, wf: WorkflowRecord) -> None:
        if not wf.ended_by:
            return
        defn = self.core.definitions.definition_of(wf)
        for act in self.core.store.list_activities(wf.workflow_exec_id):
            cur: ActivityRecord | None = act
            # Not launched: skipped. A lost skip (readied meanwhile by an upstream that
            # completed at the same moment) is read again and skipped from there.
            for _ in range(4):
                if cur is None or cur.state not in ACTIVITY_NOT_LAUNCHED:
                    break
                if self.skip(wf, defn, defn.activity(act.activity_name),
                             act.activity_exec_id, cur.state, follow=False):
                    cur = None
                    break
                cur = self.core.store.get_activity(act.activity_exec_id)
            if cur is not None:  # launched or running: stopped as a cancel stops it
                self.core.ending.stop_activity(cur, defn, ask_running=True)

    def reconcile(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                  acts: list[ActivityRecord], now: float) -> bool:
        # A RUNNING run whose attempt ended it early, and the end was lost (a crash) or
        # put off (the run was SUSPENDED then).
        ender = next((a for a in latest_of(acts).values()
                      if a.state is A.COMPLETED and a.ends_workflow), None)
        if ender is None or wf.state is not W.RUNNING:
            return False
        self.end_run(ender, wf)
        return True

    # -- its operations (engine.feature(Conditions).op) ------------------------------

    def end_early(self, aeid: str, output: Any = None, *, actor: str | None = None,
                  image: ActivityRecord | None = None,
                  written_epoch: float | None = None) -> ActivityRecord:
        """Complete the RUNNING attempt ``aeid`` and end its run COMPLETED with ``output``
        (``ActivityRun.end_workflow``, the ``END_WORKFLOW`` row). A cancel that came first
        ends it CANCELLED instead, as a COMPLETED report would; another end of the run that
        came first leaves this a plain COMPLETED (no ``ends_workflow``). Written (at
        ``written_epoch``, a row's stream record time, else now) past its deadline, it
        times the attempt out instead (engine/written.py) and StateConflict names TIMED_OUT.

        Raises:
            InvalidInput: ``output`` is not JSON or too large.
            StateConflict: the attempt is not RUNNING (``current``: as it is now; one that
                ended its run already has ``ends_workflow`` set, and the END_WORKFLOW row
                treats its own redelivery as a duplicate and redoes the follow-ups).
            EngineDriven: a map's own row or a child run's attempt.
        """
        text = self.core.reads.limits.encode(output, "output")
        item = image if image is not None and image.state is not None \
            else self.core.known.remembered(aeid) or self.core.reads.activity(aeid)
        defn = self.core.definitions.definition_of(item)
        spec = defn.activity(item.activity_name)
        self.core.moves.refuse_outside_move(defn, item, Transition.COMPLETED)
        while True:
            if item.state is A.CANCELLED_RUNNING:  # a cancel won: ends CANCELLED
                return self.core.flow.apply(item, Transition.COMPLETED, output=text, actor=actor)
            if item.state is not A.RUNNING:
                raise StateConflict(expected=[A.RUNNING.value],
                                    actual=item.state.value if item.state else None,
                                    activity_exec_id=aeid, transition="END_WORKFLOW",
                                    current=item)
            # Of two ends at once one claims the run; the other's report is a plain
            # completion of its attempt (its output kept, the run not ended by it).
            ends = claim_end(self.core, item)
            now = self.core.clock()
            at = written_epoch if written_epoch is not None else now
            changes = rules.changes_for(spec, A.RUNNING, A.COMPLETED, now=now,
                                        workflow_name=item.workflow_name,
                                        retention=self.core.definitions.retention(defn),
                                        output=text)
            if ends:
                changes["ends_workflow"] = True
            try:
                # On state = RUNNING: a heartbeat's time-out or a cancel that landed first
                # wins; written before its deadline (engine/written.py), or it timed out.
                moved = self.core.known.move(aeid, A.RUNNING, (A.COMPLETED,), changes, actor=actor,
                                    written_by=at)
            except StateConflict as lost:
                if written.came_late(lost.current, at) and lost.current is not None:
                    item, timed_out = written.time_out_late(self.core, defn, lost.current, at)
                    if timed_out:
                        self.core.flow.after(item)
                    continue
                if lost.current is None or lost.current.state is A.RUNNING:
                    raise
                item = lost.current
                continue
            self.core.flow.after(moved)
            return moved


#: Runs an attempt may still end early (SUSPENDED: ended by the first visit after RESUME).
ENDABLE = (W.RUNNING, W.SUSPENDED)


def claim_end(engine: Core, item: ActivityRecord) -> bool:
    """Claim the run's early end for the RUNNING attempt ``item``, before its COMPLETED
    (``ending_by`` on the run: one conditional write, so of two ``end_workflow`` calls at
    once exactly one wins). True: claimed (or claimed by it already: a retry); False:
    another end came first (another attempt's claim, a cancel, the run's end or failure).

    A claim whose holder ended otherwise (it died between its claim and its COMPLETED,
    then timed out) is stale: taken over, conditional on it still being the holder.
    """
    wx, aeid = item.workflow_exec_id, item.activity_exec_id
    stale: str | None = None
    for _ in range(3):  # each lost race means the claim changed hands; judged again
        if engine.store.claim_run_end(wx, aeid, states=ENDABLE, replacing=stale):
            return True
        wf = engine.store.get_workflow(wx)
        if wf is None or wf.state not in ENDABLE:
            return False
        holder = wf.ending_by
        if holder is None or holder == aeid:
            continue  # it moved between the write and the read: try again
        held = engine.store.get_activity(holder)
        if held is not None and (held.state is A.RUNNING or (
                held.state is A.COMPLETED and held.ends_workflow)):
            return False  # a live claim, or the end it made
        stale = holder
    return False
