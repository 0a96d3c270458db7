"""Waits (a feature; docs/contract.md, "Waits and suspension").

A wait (``timer``, ``signal``, ``approval``) becomes READY like any activity, and that
READY write arms its deadline (the timer's time, or the signal's or approval's timeout)
in the sparse ``timers`` index and says what it waits for (``waiting_for``). It is never
queued, launched or claimed. Whoever makes it happen ends it in **one** conditional write
``READY → RUNNING → COMPLETED`` (``moves.end_wait``: the sweep for a timer, the sender of
a signal, the approver) or ``READY → RUNNING → FAILED`` (a rejection); a timeout is
``READY → TIMED_OUT`` by the sweep (``rules.not_started_reason``), and its retry policy
follows.

What differs is how a wait ends (``contract.waits.Ends``, which each kind of
``contract/waits.py`` declares), and each way has a :class:`Ending` strategy in
:data:`ENDINGS`: one that fires does so when due, one ended by a signal takes a signal
kept for it when it becomes READY (``signals.py``), one ended by a decision waits for
``decide``. A new kind that ends one of these ways is only its class in
``contract/waits.py``; a new way of ending is one strategy here besides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from whimbrel.contract import waits
from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import InvalidInput, StateConflict
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.payloads import NO_BUCKET, PayloadLimits, decode_payload
from whimbrel.contract.records import REMOVE, ActivityRecord, WorkflowRecord
from whimbrel.contract.states import ActivityState, Transition, WorkflowState
from whimbrel.engine import signals
from whimbrel.engine.feature import Core, Feature

A = ActivityState
W = WorkflowState


class Ending(Protocol):
    """What a wait that ends one way does beyond every wait's READY write; defaults:
    nothing. The feature's hooks of the same names ask it only for attempts of waits
    that end its way.
    """

    def readied(self, core: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
                item: ActivityRecord) -> None:
        """An attempt of this kind just became READY."""
        return None

    def due(self, core: Core, item: ActivityRecord, defn: WorkflowDefinition,
            wf: WorkflowRecord, now: float, actor: str) -> str | None:
        """A READY attempt's deadline is due: ``"fired"``, ``"gone"``, or None (it times
        out, by the sweep)."""
        return None

    def reconcile(self, core: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
                  acts: list[ActivityRecord], now: float) -> bool:
        """A RUNNING run's reconcile visit; True if it repaired something."""
        return False


class Fires(Ending):
    """``timer``: fires (COMPLETED with ``{"fired_at": …}``) when its time is due."""

    def due(self, core: Core, item: ActivityRecord, defn: WorkflowDefinition,
            wf: WorkflowRecord, now: float, actor: str) -> str | None:
        spec = defn.activity(item.activity_name)
        verb = Transition.COMPLETED
        output: str | None = output_json({"fired_at": now})
        error: str | None = None
        try:
            if spec.launcher.config.get("until_input"):
                waits.timer_until(spec, activity_input(core, wf, spec))
        except InvalidInput as exc:
            verb, output, error = Transition.FAILED, None, str(exc)
        try:
            core.moves.end_wait(item, defn, verb, output=output, error=error,
                           actor=actor, error_type="InvalidInput" if error else None,
                           due_by=now)
        except StateConflict:
            return "gone"  # cancelled (or fired by another sweep) since the index read
        return "fired"


class BySignal(Ending):
    """``signal``: takes a signal kept for its name when it becomes READY (signals.py)."""

    def readied(self, core: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
                item: ActivityRecord) -> None:
        signals.after_ready(core, wf, defn, item)

    def reconcile(self, core: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
                  acts: list[ActivityRecord], now: float) -> bool:
        return signals.repair(core, wf, defn, acts, now)


class ByDecision(Ending):
    """``approval``: ended by :func:`decide`."""


#: The engine's part of each way a wait ends: every ``Ends`` has one (a test checks), so
#: no wait kind falls through to another's behaviour.
ENDINGS: Mapping[waits.Ends, Ending] = {
    waits.Ends.FIRES: Fires(),
    waits.Ends.SIGNAL: BySignal(),
    waits.Ends.DECISION: ByDecision(),
}


def ending(spec: ActivityDefinition) -> Ending | None:
    """The strategy of the way ``spec``'s wait ends; None when it is not a wait."""
    kind = waits.wait_kind(spec)
    return ENDINGS[kind.ends] if kind is not None else None


class Waits(Feature):
    """Every wait's READY write and refusals; the rest by its kind's strategy."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def ready(self, spec: ActivityDefinition, wf: WorkflowRecord, now: float,
              changes: dict[str, Any]) -> None:
        if waits.wait_kind(spec) is None:
            return
        due = waits.deadline(spec, now, activity_input(self.core, wf, spec))
        changes["timer_epoch"] = due if due is not None else REMOVE
        changes["waiting_for"] = waits.waiting_for(spec, due)
        if waits.approvers(spec):
            changes["approvers"] = list(waits.approvers(spec))

    def refuse(self, spec: ActivityDefinition, item: ActivityRecord,
               verb: Transition) -> None:
        """A wait moves only by its own event, or CANCEL.

        Raises:
            WaitsForEvent: any other verb asked of a wait.
        """
        if waits.wait_kind(spec) is not None and verb is not Transition.CANCEL:
            raise waits.WaitsForEvent(activity_exec_id=item.activity_exec_id,
                                      kind=spec.launcher.kind, transition=verb.value)

    def readied(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                item: ActivityRecord) -> None:
        end = ending(defn.activity(item.activity_name))
        if end is not None:
            end.readied(self.core, wf, defn, item)

    def due(self, item: ActivityRecord, defn: WorkflowDefinition, run: Callable[[], Any],
            now: float, actor: str) -> str | None:
        end = ending(defn.activity(item.activity_name))
        wf = run() if end is not None and item.state is A.READY else None
        if end is None or wf is None:
            return None
        return end.due(self.core, item, defn, wf, now, actor)

    def check_at_end(self, wf: WorkflowRecord, now: float) -> float | None:
        """A run ending with kept signals no wait received keeps a check time, so they
        are reported (``after_end``) even if this process dies after the end."""
        return now if signals.undelivered(self.core, wf) else None

    def after_end(self, wf: WorkflowRecord) -> None:
        signals.report_undelivered(self.core, wf)

    def reconcile(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                  acts: list[ActivityRecord], now: float) -> bool:
        if wf.state is not W.RUNNING:
            return False
        repaired = False
        for end in ENDINGS.values():
            repaired |= end.reconcile(self.core, wf, defn, acts, now)
        return repaired

    # -- its operations (engine.feature(Waits).op) -------------------------------------

    def send(self, workflow_exec_id: str, name: Any, payload: Any = None, *,
             signal_id: Any = None) -> signals.SignalOutcome:
        """Deliver signal ``name`` to a run, or keep it for the wait to come (the signal
        kind's delivery: signals.py).

        Raises:
            InvalidInput: a malformed argument, a payload that is not JSON or too large, a
                name no activity of the run waits for.
            WorkflowNotFound: no such run.
            SignalRefused: the run has ended (or is ending), every wait of that name has
                received a signal or ended, or the ``signal_id`` names another signal.
        """
        return signals.send(self.core, workflow_exec_id, name, payload, signal_id=signal_id)

    def decide(self, activity_exec_id: str, *, approve: bool, by: Any, comment: Any,
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
        item = self.core.known.remembered(activity_exec_id) \
            or self.core.reads.activity(activity_exec_id)
        defn = self.core.definitions.definition_of(item)
        spec = defn.activity(item.activity_name)
        if not waits.decided(spec):
            raise InvalidInput(f"activity {activity_exec_id} is not an approval (its launcher "
                               f"is {spec.launcher.kind!r}, which no decision ends)",
                               field="activity_exec_id")
        allowed = waits.approvers(spec)
        if allowed and who not in allowed:
            raise waits.NotAnApprover(activity_exec_id=activity_exec_id, by=who, allowed=allowed)
        if item.state is not A.READY:
            item = self.core.reads.activity(activity_exec_id)  # judge on a fresh read
        if item.state is not A.READY:
            raise StateConflict(expected=A.READY.value,
                                actual=item.state.value if item.state else None,
                                activity_exec_id=activity_exec_id,
                                transition="APPROVE" if approve else "REJECT", current=item)
        if approve:
            output = waits.approval_output(who, text, self.core.clock())
            return self.core.moves.end_wait(item, defn, Transition.COMPLETED, actor=actor,
                            output=output_json(output, self.core.reads.limits))
        return self.core.moves.end_wait(item, defn, Transition.FAILED, actor=actor,
                        error=waits.rejection_error(who, text), error_type=waits.REJECTED)


def activity_input(core: Core, wf: WorkflowRecord, spec: ActivityDefinition) -> Any:
    """The activity's input (the run's input, its static input over it); None when the
    stored input is not JSON (a raw client's row)."""
    try:
        workflow_input = decode_payload(core.reads.run_input(wf), field="input")
    except InvalidInput:
        workflow_input = None
    return waits.merge_input(workflow_input, spec.input)


def output_json(value: Any, limits: PayloadLimits = NO_BUCKET) -> str:
    """A wait's output as stored (JSON text).

    Raises:
        InvalidInput: not JSON, or larger than an output may be.
    """
    text = limits.encode(value, "output")
    return "null" if text is None else text
