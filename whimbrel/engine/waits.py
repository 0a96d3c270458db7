"""Waits in the engine (docs/contract.md, "Waits and suspension").

A wait (``timer``, ``signal``, ``approval``) becomes READY like any activity, and that
READY write arms its deadline (the timer's time, or the signal's or approval's timeout)
in the sparse ``timers`` index and says what it waits for (``waiting_for``). It is never
queued, launched or claimed. Whoever makes it happen ends it in **one** conditional write
``READY → RUNNING → COMPLETED`` (the sweep for a timer, the sender of a signal, the
approver) or ``READY → RUNNING → FAILED`` (a rejection); a timeout is ``READY →
TIMED_OUT`` by the sweep (``rules.not_started_reason``), and its retry policy follows.

While the workflow is SUSPENDED the sweep *holds* the deadlines of attempts that have not
started (READY, REQUESTED) instead of acting on them: ``held_epoch`` keeps the deadline
and the timer is disarmed, so held items cost the sweep nothing; the reconcile pass after
a resume re-arms them (``rearm``) and the resume fires what is due.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from whimbrel.contract import waits
from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.errors import InvalidInput, StateConflict
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.limits import MAX_OUTPUT_BYTES
from whimbrel.contract.payloads import decode_payload, encode_payload
from whimbrel.contract.records import REMOVE, ActivityRecord, Changes, WorkflowRecord
from whimbrel.contract.states import (
    ACTIVITY_PENDING,
    ACTIVITY_TRANSITIONS,
    ActivityState,
    Transition,
    WorkflowState,
    activity_path,
)
from whimbrel.engine import rules

if TYPE_CHECKING:
    from whimbrel.contract.definitions import WorkflowDefinition
    from whimbrel.engine.flow import Flow

A = ActivityState
W = WorkflowState
#: Launched, not yet running (QUEUED, PREPARING): launched before a suspend, they may
#: still report RUNNING while the run is SUSPENDED.
LAUNCHED = frozenset(n for (s, t), n in ACTIVITY_TRANSITIONS.items()
                     if t in (Transition.QUEUED, Transition.PREPARING))
#: Not launched (REQUESTED, READY): their deadlines are held while the run is SUSPENDED.
NOT_LAUNCHED = ACTIVITY_PENDING - LAUNCHED


# -- becoming READY ------------------------------------------------------------------------

def activity_input(wf: WorkflowRecord, spec: ActivityDefinition) -> Any:
    """The activity's input (the run's input, its static input over it); None when the
    stored input is not JSON (a raw client's row)."""
    try:
        workflow_input = decode_payload(wf.input, field="input")
    except InvalidInput:
        workflow_input = None
    return waits.merge_input(workflow_input, spec.input)


def ready_changes(spec: ActivityDefinition, wf: WorkflowRecord, now: float,
                  changes: Changes) -> dict[str, Any]:
    """What a write that makes ``spec`` READY carries besides ``rules.changes_for``: a
    wait's deadline and ``waiting_for``; no claim for a pull activity of a SUSPENDED run
    (the resume puts it in the ``claimable`` index)."""
    out = dict(changes)
    if spec.launcher.is_wait:
        due = waits.deadline(spec, now, activity_input(wf, spec))
        out["timer_epoch"] = due if due is not None else REMOVE
        out["waiting_for"] = waits.waiting_for(spec, due)
        if waits.approvers(spec):
            out["approvers"] = list(waits.approvers(spec))
    if wf.state is W.SUSPENDED:
        out.pop("claimable", None)
    return out


def record_fields(changes: Changes) -> dict[str, Any]:
    """The fields of ``ready_changes`` for a record created READY (a root)."""
    approvers = changes.get("approvers")
    return {"waiting_for": changes.get("waiting_for"),
            "approvers": tuple(approvers) if approvers is not None else None}


# -- guards for callers outside the engine -------------------------------------------------

def check_outside_move(spec: ActivityDefinition, item: ActivityRecord,
                       verb: Transition) -> None:
    """A wait moves only by its own event, or CANCEL.

    Raises:
        WaitsForEvent: any other verb asked of a wait.
    """
    if spec.launcher.is_wait and verb is not Transition.CANCEL:
        raise waits.WaitsForEvent(activity_exec_id=item.activity_exec_id,
                                  kind=spec.launcher.kind, transition=verb.value)


def may_start_while(wf_state: WorkflowState, source: ActivityState) -> bool:
    """Whether an attempt in ``source`` may start in a workflow in ``wf_state``: only in a
    RUNNING one, or, SUSPENDED, when it was launched before the suspend."""
    return wf_state is W.RUNNING or (wf_state is W.SUSPENDED and source in LAUNCHED)


# -- ending a wait in one write ------------------------------------------------------------

def end_wait(engine: Flow, item: ActivityRecord, defn: WorkflowDefinition,
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
    engine.after(moved, wf_read)
    return moved


def decide(engine: Flow, activity_exec_id: str, *, approve: bool, by: Any, comment: Any,
           actor: str | None = None) -> ActivityRecord:
    """Approve (COMPLETED) or reject (FAILED) an approval wait, in one write.

    Raises:
        InvalidInput: a malformed id, ``by`` or ``comment``, or not an approval.
        ActivityNotFound: no such attempt.
        NotAnApprover: the approval lists its approvers and ``by`` is not one of them.
        StateConflict: it is not waiting for a decision (not READY: another decision, a
            timeout or a cancel came first, or it was not reached yet).
    """
    parse_activity_exec_id(activity_exec_id)
    who, text = waits.decision_text(by, comment)
    item = engine.remembered(activity_exec_id) or engine.activity(activity_exec_id)
    defn = engine.definition_of(item)
    spec = defn.activity(item.activity_name)
    if spec.launcher.kind != waits.APPROVAL:
        raise InvalidInput(f"activity {activity_exec_id} is not an approval (its launcher "
                           f"is {spec.launcher.kind!r})", field="activity_exec_id")
    allowed = waits.approvers(spec)
    if allowed and who not in allowed:
        raise waits.NotAnApprover(activity_exec_id=activity_exec_id, by=who, allowed=allowed)
    if item.state is not A.READY:
        item = engine.activity(activity_exec_id)  # judge on a fresh read
    if item.state is not A.READY:
        raise StateConflict(expected=A.READY.value,
                            actual=item.state.value if item.state else None,
                            activity_exec_id=activity_exec_id,
                            transition="APPROVE" if approve else "REJECT", current=item)
    if approve:
        output = waits.approval_output(who, text, engine.clock())
        return end_wait(engine, item, defn, Transition.COMPLETED, actor=actor,
                        output=output_json(output))
    return end_wait(engine, item, defn, Transition.FAILED, actor=actor,
                    error=waits.rejection_error(who, text), error_type=waits.REJECTED)


def output_json(value: Any) -> str:
    """A wait's output as stored (JSON text).

    Raises:
        InvalidInput: not JSON, or larger than an output may be.
    """
    text = encode_payload(value, field="output", max_bytes=MAX_OUTPUT_BYTES)
    return "null" if text is None else text


# -- due deadlines (the sweep) -------------------------------------------------------------

def on_due(engine: Flow, item: ActivityRecord, defn: WorkflowDefinition, now: float, *,
           actor: str) -> str | None:
    """The sweep's part for waits and suspended runs, for one due item: ``"held"`` (its
    run is SUSPENDED), ``"fired"`` (a timer completed or failed), ``"gone"`` (a timer
    that moved on since the index read), or None when the sweep's usual handling applies
    (a signal or approval timing out, everything else)."""
    state = item.state
    if state not in NOT_LAUNCHED:
        return None
    spec = defn.activity(item.activity_name)
    wf = engine.store.get_workflow(item.workflow_exec_id)
    if wf is None:
        return None
    if wf.state is W.SUSPENDED:
        hold(engine, item)
        return "held"
    if state is not A.READY or spec.launcher.kind != waits.TIMER:
        return None
    verb = Transition.COMPLETED
    output: str | None = output_json({"fired_at": now})
    error: str | None = None
    try:
        if spec.launcher.config.get("until_input"):
            waits.timer_until(spec, activity_input(wf, spec))
    except InvalidInput as exc:
        verb, output, error = Transition.FAILED, None, str(exc)
    try:
        end_wait(engine, item, defn, verb, output=output, error=error, actor=actor,
                 error_type="InvalidInput" if error else None, due_by=now)
    except StateConflict:
        return "gone"  # cancelled (or fired by another sweep) since the index read
    return "fired"


def hold(engine: Flow, item: ActivityRecord) -> None:
    """Keep a due deadline of a SUSPENDED run aside (``held_epoch``) and disarm it.

    Written first, then the workflow read again: a resume that listed the activities
    before this write landed is seen here, and the deadline is re-armed at once.
    """
    state = item.state
    assert state is not None and item.timer_epoch is not None
    held = {"held_epoch": item.timer_epoch, "timer_epoch": REMOVE}
    if not engine.store.try_set_activity(item.activity_exec_id, held, states=[state]):
        return  # it moved on since the index read
    fresh = engine.store.get_workflow(item.workflow_exec_id)
    if fresh is not None and fresh.state is not W.SUSPENDED:
        rearm(engine, item.with_changes(held_epoch=item.timer_epoch))


def rearm(engine: Flow, item: ActivityRecord) -> bool:
    """Arm a held deadline again (on resume, or by the reconciler); True if it did."""
    if item.held_epoch is None or item.state is None:
        return False
    return engine.store.try_set_activity(
        item.activity_exec_id, {"timer_epoch": item.held_epoch, "held_epoch": REMOVE},
        states=[item.state])


# -- repairs (the reconciler) --------------------------------------------------------------

def repair_claims(engine: Flow, wf: WorkflowRecord, defn: WorkflowDefinition,
                  acts: list[ActivityRecord]) -> bool:
    """Make the ``claimable`` index agree with the run's state: READY pull attempts are
    in it while the run is RUNNING and out of it while SUSPENDED. True if it changed
    anything (after a suspend or resume that died half-way, or a hand-off racing them)."""
    claimable = wf.state is W.RUNNING
    changed = False
    for act in acts:
        spec = defn.activity(act.activity_name)  # a map's item: its map's
        if act.state is not A.READY or not spec.launcher.is_pull:
            continue
        if claimable == (act.claim_key is not None):
            continue
        # The key a claim filters on: the activity's name (a map item's: its map's).
        intent: Any = (act.workflow_name, spec.name) if claimable else REMOVE
        changed |= engine.store.try_set_activity(act.activity_exec_id,
                                                 {"claimable": intent}, states=[A.READY])
    return changed


def repair_running(engine: Flow, wf: WorkflowRecord, defn: WorkflowDefinition,
                   acts: list[ActivityRecord]) -> bool:
    """What a RUNNING run's reconcile visit does for waits and resumes: re-arm held
    deadlines and put READY pull attempts back in the ``claimable`` index."""
    changed = repair_claims(engine, wf, defn, acts)
    for act in acts:
        changed |= rearm(engine, act)
    return changed
