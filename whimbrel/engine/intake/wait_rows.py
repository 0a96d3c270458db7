"""Simple API rows for waits and suspension: ``SIGNAL``, ``APPROVE``, ``REJECT``,
``SUSPEND``, ``RESUME`` (docs/simple-api.md).

A row is checked whole before anything is applied (``signals.send`` and
``waits.decide`` check every argument before their first write). Each is idempotent
under redelivery: a SIGNAL row's ``signal_id`` (default: the row's id) counts once; a
decision, a suspend or a resume is recognised by its actor ``event:<activity_event_id>``
in the item's history.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from whimbrel.contract.commands import WORKFLOW_COMMANDS, Command
from whimbrel.contract.errors import InvalidInput, StateConflict
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.engine import signals, suspend, waits
from whimbrel.engine.intake.decode import payload
from whimbrel.engine.intake.items import ActivityEventItem

if TYPE_CHECKING:
    from whimbrel.engine.intake import Intake, IntakeResult

#: The row verbs this module applies.
WAIT_ROWS = frozenset({Command.SIGNAL, Command.APPROVE, Command.REJECT, Command.SUSPEND,
                       Command.RESUME})
#: ``result_state`` of a SIGNAL row whose signal waits for its activity (kept).
KEPT = "KEPT"


def required_activity(item: ActivityEventItem) -> str:
    """The row's ``activity_exec_id``, which its verb needs.

    Raises:
        InvalidInput: it has none.
    """
    if item.activity_exec_id is None:
        raise InvalidInput(f"{_a(item.verb.value)} row needs activity_exec_id "
                           "(<workflow_exec_id>:<activity>:<attempt>)",
                           field="activity_exec_id")
    return item.activity_exec_id


def _a(verb: str) -> str:
    return f"{'an' if verb[:1] in 'AEIOU' else 'a'} {verb}"


def required_workflow(item: ActivityEventItem) -> str:
    """The row's ``workflow_exec_id``, for a verb that addresses a whole run.

    Raises:
        InvalidInput: it has none, or names an activity execution instead.
    """
    verb = _a(item.verb.value)
    if item.activity_exec_id is not None:
        raise InvalidInput(f"{verb} row addresses a workflow: give workflow_exec_id, "
                           "not activity_exec_id", field="activity_exec_id")
    if not item.workflow_exec_id:
        raise InvalidInput(f"{verb} row needs workflow_exec_id", field="workflow_exec_id")
    return item.workflow_exec_id


def apply_wait_row(intake: Intake, record: Mapping[str, Any],
                   item: ActivityEventItem) -> IntakeResult:
    """Apply one SIGNAL, APPROVE, REJECT, SUSPEND or RESUME row.

    Raises:
        WhimbrelError: what the engine raised (the intake rejects it, or retries it when
            it is retryable).
    """
    from whimbrel.engine.intake import IntakeResult, Outcome

    engine = intake.engine
    verb = item.verb
    actor = f"event:{item.activity_event_id}"
    if verb in WORKFLOW_COMMANDS:
        wx = required_workflow(item)
        if verb is Command.SIGNAL:
            if not item.signal:
                raise InvalidInput("a SIGNAL row needs signal (the signal's name)",
                                   field="signal")
            sent = signals.send(engine, wx, item.signal, payload(item.payload, "payload"),
                                signal_id=item.signal_id or item.activity_event_id)
            return IntakeResult(Outcome.DUPLICATE if sent.duplicate else Outcome.APPLIED,
                                workflow_exec_id=wx, activity_exec_id=sent.received_by,
                                transition=verb.value,
                                new_state="COMPLETED" if sent.received_by else KEPT)
        wf = engine.workflow(wx)
        if any(h.by == actor for h in wf.history):
            return IntakeResult(Outcome.DUPLICATE, workflow_exec_id=wx,
                                transition=verb.value, new_state=wf.state.value)
        move = suspend.suspend if verb is Command.SUSPEND else suspend.resume
        wf = move(engine, wx, actor=actor)
        return IntakeResult(Outcome.APPLIED, workflow_exec_id=wx, transition=verb.value,
                            new_state=wf.state.value)
    aeid = required_activity(item)
    key = parse_activity_exec_id(aeid)
    item.check_ids(key.workflow_exec_id, key.activity_name)
    try:
        moved = waits.decide(engine, aeid, approve=verb is Command.APPROVE, by=item.by,
                             comment=item.comment, actor=actor)
    except StateConflict as exc:
        return intake._not_applied(record, item, actor, exc, None, None)
    return IntakeResult(Outcome.APPLIED, workflow_exec_id=moved.workflow_exec_id,
                        activity_exec_id=aeid, transition=verb.value,
                        new_state=moved.state.value if moved.state else None)
