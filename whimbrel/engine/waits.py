"""Waits (a feature; docs/contract.md, "Waits and suspension").

A wait (``timer``, ``signal``, ``approval``) becomes READY like any activity, and that
READY write arms its deadline (the timer's time, or the signal's or approval's timeout)
in the sparse ``timers`` index and says what it waits for (``waiting_for``). It is never
queued, launched or claimed. Whoever makes it happen ends it in **one** conditional write
``READY → RUNNING → COMPLETED`` (``moves.end_wait``: the sweep for a timer, the sender of
a signal, the approver) or ``READY → RUNNING → FAILED`` (a rejection); a timeout is
``READY → TIMED_OUT`` by the sweep (``rules.not_started_reason``), and its retry policy
follows.

What differs between kinds is a :class:`WaitKind` strategy in :data:`KINDS`, keyed by
launcher kind: a timer fires when due, a signal wait takes a signal kept for it when it
becomes READY (``signals.py``), an approval waits for ``decide``. A new kind is its
settings in ``contract/waits.py`` and one entry here.
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


class WaitKind(Protocol):
    """What one kind of wait does beyond every wait's READY write; defaults: nothing.

    The feature's hooks of the same names ask it only for attempts of its kind.
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


class Timer(WaitKind):
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


class Signal(WaitKind):
    """``signal``: takes a signal kept for its name when it becomes READY (signals.py)."""

    def readied(self, core: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
                item: ActivityRecord) -> None:
        signals.after_ready(core, wf, defn, item)

    def reconcile(self, core: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
                  acts: list[ActivityRecord], now: float) -> bool:
        return signals.repair(core, wf, defn, acts, now)


class Approval(WaitKind):
    """``approval``: ended by :func:`decide`."""


#: The wait kinds, by launcher kind (contract/waits.py says what each accepts).
KINDS: Mapping[str, WaitKind] = {
    waits.TIMER: Timer(),
    waits.SIGNAL: Signal(),
    waits.APPROVAL: Approval(),
}


class Waits(Feature):
    """Every wait's READY write and refusals; the rest by its kind's strategy."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.kinds = KINDS

    def ready(self, spec: ActivityDefinition, wf: WorkflowRecord, now: float,
              changes: dict[str, Any]) -> None:
        if spec.launcher.kind not in self.kinds:
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
        if spec.launcher.kind in self.kinds and verb is not Transition.CANCEL:
            raise waits.WaitsForEvent(activity_exec_id=item.activity_exec_id,
                                      kind=spec.launcher.kind, transition=verb.value)

    def readied(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                item: ActivityRecord) -> None:
        kind = self.kinds.get(defn.activity(item.activity_name).launcher.kind)
        if kind is not None:
            kind.readied(self.core, wf, defn, item)

    def due(self, item: ActivityRecord, defn: WorkflowDefinition, run: Callable[[], Any],
            now: float, actor: str) -> str | None:
        kind = self.kinds.get(defn.activity(item.activity_name).launcher.kind)
        wf = run() if kind is not None and item.state is A.READY else None
        if kind is None or wf is None:
            return None
        return kind.due(self.core, item, defn, wf, now, actor)

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
        for kind in self.kinds.values():
            repaired |= kind.reconcile(self.core, wf, defn, acts, now)
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
        return self.core.feature(Waits).send(workflow_exec_id, name, payload, signal_id=signal_id)

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
        if spec.launcher.kind != waits.APPROVAL:
            raise InvalidInput(f"activity {activity_exec_id} is not an approval (its launcher "
                               f"is {spec.launcher.kind!r})", field="activity_exec_id")
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
