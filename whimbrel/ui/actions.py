"""The operator actions the console offers, each one call of the public facade.

An action is data: what it applies to, the ``Whimbrel`` method it calls, the fields
its confirmation form asks for. The console offers an action only when the facade has
that method, so the actions of later releases (redrive, approve/reject, signal,
suspend/resume) appear by themselves once ``Whimbrel`` gains them; adding another is
one more entry in :data:`ACTIONS`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from whimbrel import ActivityExec, WorkflowExec
from whimbrel.contract import waits
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.states import (
    ACTIVITY_FAILED,
    WORKFLOW_REDRIVABLE,
    ActivityState,
    WorkflowState,
)

A = ActivityState
W = WorkflowState


@dataclass(frozen=True)
class Field:
    """One input of a confirmation form."""

    name: str
    label: str
    kind: Literal["text", "textarea"] = "text"
    required: bool = False
    placeholder: str = ""


@dataclass(frozen=True)
class Action:
    name: str
    label: str
    target: Literal["run", "activity"]
    #: The ``Whimbrel`` method called; the action is offered only if it exists.
    facade: str
    explain: str
    applies: Callable[[WorkflowExec, ActivityExec | None], bool]
    call: Callable[[Any, str, Mapping[str, str]], object]
    fields: tuple[Field, ...] = ()
    danger: bool = False
    done: str = "done"

    def offered(self, wb: object) -> bool:
        return callable(getattr(wb, self.facade, None))


def waiting_for(act: ActivityExec | None) -> str | None:
    """What a waiting activity waits for (``"approval"``, ``"signal:payment"``, …), once
    activity views carry it."""
    value = getattr(act, "waiting_for", None)
    return str(value) if value else None


def _payload(text: str) -> Any:
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"payload is not valid JSON: {exc}", field="payload") from None


def _required(form: Mapping[str, str], name: str) -> str:
    value = form.get(name, "").strip()
    if not value:
        raise InvalidInput(f"{name} is required", field=name)
    return value


def _retryable(wf: WorkflowExec, act: ActivityExec | None) -> bool:
    if act is None or wf.state is not W.RUNNING or act.state not in ACTIVITY_FAILED:
        return False
    latest = wf.latest_activities.get(act.activity_name)
    # The latest attempt, or the one before a retry that waits for its back-off.
    return latest is not None and (latest.attempt == act.attempt or (
        latest.attempt == act.attempt + 1 and latest.state is A.REQUESTED))


def _waits_for_approval(wf: WorkflowExec, act: ActivityExec | None) -> bool:
    """Offered only for a wait whose kind a decision ends (contract/waits.py's ``Ends``):
    a kind the table does not know gets no Approve button, never a guess."""
    return waits.offers_decision(waiting_for(act)) and not wf.state.is_terminal


def _verdict(method: str, label: str, explain: str, *, done: str,
             danger: bool = False) -> Action:
    """Approve or reject an activity waiting for approval: ``wb.<method>(aeid, by=…,
    comment=…)``."""
    def call(wb: Any, aeid: str, form: Mapping[str, str]) -> object:
        return getattr(wb, method)(aeid, by=_required(form, "by"),
                                   comment=form.get("comment", ""))
    return Action(method, label, "activity", method, explain, _waits_for_approval, call,
                  fields=(Field("by", "Your name (a label, not a sign-in)", required=True),
                          Field("comment", "Comment", "textarea")),
                  danger=danger, done=done)


ACTIONS: tuple[Action, ...] = (
    Action("cancel", "Cancel run", "run", "cancel_workflow",
           "Nothing new starts; activities that have not started become CANCELLED and "
           "running ones are asked to stop (they end CANCELLED when they report, or "
           "TIMED_OUT if they go silent). The run ends CANCELLED.",
           lambda wf, _: not wf.state.is_terminal,
           lambda wb, wx, form: wb.cancel_workflow(wx), danger=True,
           done="Cancellation requested."),
    Action("retry", "Retry now", "activity", "retry_activity",
           "Runs this failed attempt again as a new attempt, now (a retry waiting for "
           "its back-off is launched at once instead). The failed attempt stays as it is.",
           _retryable, lambda wb, aeid, form: wb.retry_activity(aeid),
           done="Retry launched."),
    Action("redrive", "Redrive", "run", "redrive_workflow",
           "Runs the run again from where it broke: every activity that did not complete "
           "gets a new attempt, completed ones keep their output (a map its completed "
           "items).",
           lambda wf, _: wf.state in WORKFLOW_REDRIVABLE,
           lambda wb, wx, form: wb.redrive_workflow(wx), done="Redrive started."),
    _verdict("approve", "Approve", "Records your approval; the activity completes and its "
             "dependents start.", done="Approved."),
    _verdict("reject", "Reject", "Records your rejection; the activity fails (its retry "
             "policy does not apply).", done="Rejected.", danger=True),
    Action("signal", "Send signal", "run", "signal",
           "Delivers a named signal (with an optional JSON payload) to the run; an "
           "activity waiting for it continues. A signal id makes resending harmless.",
           lambda wf, _: not wf.state.is_terminal,
           lambda wb, wx, form: wb.signal(wx, _required(form, "name"),
                                          _payload(form.get("payload", "")),
                                          signal_id=form.get("signal_id") or None),
           fields=(Field("name", "Signal name", required=True, placeholder="payment"),
                   Field("payload", "Payload (JSON)", "textarea", placeholder='{"ok": true}'),
                   Field("signal_id", "Signal id (optional)")), done="Signal sent."),
    Action("fork", "Fork from here", "activity", "fork_workflow",
           "Starts a new run of the same definition version that runs this activity and "
           "everything after it again, keeping the completed outputs of the rest (they "
           "do not run again). This run stays as it is.",
           lambda wf, act: act is not None and act.item_index is None,
           lambda wb, aeid, form: wb.fork_workflow(
               parse_activity_exec_id(aeid).workflow_exec_id,
               from_activity=parse_activity_exec_id(aeid).activity_name),
           done="Fork started."),
    Action("suspend", "Suspend", "run", "suspend_workflow",
           "Nothing new starts until the run is resumed; running activities go on.",
           lambda wf, _: wf.state is W.RUNNING,
           lambda wb, wx, form: wb.suspend_workflow(wx), done="Suspended."),
    Action("resume", "Resume", "run", "resume_workflow",
           "Lets the suspended run go on: activities whose upstreams completed start.",
           lambda wf, _: wf.state.value == "SUSPENDED",
           lambda wb, wx, form: wb.resume_workflow(wx), done="Resumed."),
)

BY_NAME = {a.name: a for a in ACTIONS}


def available(wb: object, wf: WorkflowExec, act: ActivityExec | None,
              target: Literal["run", "activity"]) -> list[Action]:
    """The actions a person may take now on this run (or on this attempt of it)."""
    return [a for a in ACTIONS
            if a.target == target and a.offered(wb) and a.applies(wf, act)]


def approvers(defn: WorkflowDefinition, act: ActivityExec) -> tuple[str, ...]:
    """Who may approve or reject ``act`` (its launcher's ``approvers``; empty: anyone)."""
    if act.activity_name not in defn.names:
        return ()
    return waits.approvers(defn.activity(act.activity_name))


def signal_hint(wf: WorkflowExec) -> str:
    """The signal an activity of the run waits for (prefills the signal form)."""
    for act in wf.latest_activities.values():
        name = waits.signal_waited(waiting_for(act))
        if name is not None:
            return name
    return ""
