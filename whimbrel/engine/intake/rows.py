"""The Simple API row kinds besides the contract's moves: one entry each in :data:`ROWS`
(docs/simple-api.md).

A row is read whole before anything is applied: the intake parses the item
(``items.py``), :func:`target` checks the ids its verb needs (a run for the verbs of
``WORKFLOW_COMMANDS``, an attempt for the others), and the kind's ``apply`` decodes what
else it needs and calls the engine, whose calls check every argument before their first
write. Each kind is idempotent under redelivery: a heartbeat repeats harmlessly, a
SIGNAL row's ``signal_id`` (default: the row's id) counts once, and a redrive, decision,
suspend or resume is recognised by its actor ``event:<activity_event_id>`` in the item's
history.

A new row kind is its verb in ``contract/commands.py`` and one entry here. A contract
verb may have an entry too, for a row shape beside the plain move: ``CANCEL`` with only
``workflow_exec_id`` cancels the whole run (:func:`cancel`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from whimbrel.contract.commands import WORKFLOW_COMMANDS, Command
from whimbrel.contract.errors import (
    ActivityCancelled,
    ActivityTimedOut,
    IllegalTransition,
    InvalidInput,
    NotAllowedNow,
    StateConflict,
    WorkflowAlreadyEnded,
)
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.limits import MAX_HEARTBEAT_DETAILS_BYTES
from whimbrel.contract.payloads import encode_payload
from whimbrel.contract.states import Transition
from whimbrel.engine.conditions import Conditions
from whimbrel.engine.engine import Engine
from whimbrel.engine.intake.decode import row_payload, written_epoch
from whimbrel.engine.intake.items import ActivityEventItem
from whimbrel.engine.intake.result import IntakeResult, Outcome
from whimbrel.engine.redrive import Redrive
from whimbrel.engine.suspend import Suspend
from whimbrel.engine.waits import Waits

#: ``result_state`` of a SIGNAL row whose signal waits for its activity (kept).
KEPT = "KEPT"


class Context(Protocol):
    """What a row kind sees of the intake."""

    engine: Engine

    def move(self, record: Mapping[str, Any], item: ActivityEventItem,
             aeid: str) -> IntakeResult: ...

    def not_applied(self, record: Mapping[str, Any], item: ActivityEventItem, actor: str,
                    exc: StateConflict | IllegalTransition, output: Any,
                    error: Any) -> IntakeResult: ...


#: Applies one row whose ids were checked: ``(intake, record, item, target)`` where the
#: target is the ``workflow_exec_id`` or ``activity_exec_id`` the verb addresses.
Apply = Callable[[Context, Mapping[str, Any], ActivityEventItem, str], IntakeResult]


# -- checking the ids ------------------------------------------------------------------------

def target(item: ActivityEventItem) -> str:
    """The id the row's verb addresses, checked.

    Raises:
        InvalidInput: it is missing or malformed, names the wrong kind of execution, or
            disagrees with the row's ``workflow_exec_id`` / ``activity_name``; a
            TIME_OUT row (only the heartbeat listener times attempts out).
    """
    if item.verb in WORKFLOW_COMMANDS or addresses_run(item):
        return required_workflow(item)
    aeid = required_activity(item)
    key = parse_activity_exec_id(aeid)
    if item.verb is Transition.TIME_OUT:
        raise InvalidInput("TIME_OUT is applied only by the heartbeat listener",
                           field="transition")
    if item.verb is Transition.SKIP:
        raise InvalidInput("SKIP is made only by the engine (an activity is skipped by its "
                           "`when`, or by a run ended early: END_WORKFLOW)",
                           field="transition")
    item.check_ids(key.workflow_exec_id, key.activity_name)
    return aeid


def required_activity(item: ActivityEventItem) -> str:
    """The row's ``activity_exec_id``, which its verb needs.

    Raises:
        InvalidInput: it has none.
    """
    if item.activity_exec_id is None:
        also = (", or only workflow_exec_id to cancel the whole run"
                if item.verb in RUN_VERBS else "")
        raise InvalidInput(f"{_a(item.verb.value)} row needs activity_exec_id "
                           f"(<workflow_exec_id>:<activity>:<attempt>){also}",
                           field="activity_exec_id")
    return item.activity_exec_id


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


def addresses_run(item: ActivityEventItem) -> bool:
    """A row of a contract verb that names a whole run instead of one attempt (only
    ``workflow_exec_id``): ``CANCEL`` of a run."""
    return item.verb in RUN_VERBS and item.activity_exec_id is None \
        and item.workflow_exec_id is not None


def _a(verb: str) -> str:
    return f"{'an' if verb[:1] in 'AEIOU' else 'a'} {verb}"


def actor_of(item: ActivityEventItem) -> str:
    """The actor a row's move is recorded under (how a redelivery is recognised)."""
    return f"event:{item.activity_event_id}"


# -- the kinds -----------------------------------------------------------------------------

def heartbeat(intake: Context, record: Mapping[str, Any], item: ActivityEventItem,
              aeid: str) -> IntakeResult:
    wx = parse_activity_exec_id(aeid).workflow_exec_id
    details = encode_payload(row_payload(intake.engine.store, item.details, None, "details"),
                             field="details",
                             max_bytes=MAX_HEARTBEAT_DETAILS_BYTES)
    try:
        state = intake.engine.heartbeats.heartbeat(aeid, details=details,
                                        written_epoch=written_epoch(record)).value
    except ActivityCancelled as exc:
        # Recorded; the sender learns from the row's result_state that it must stop.
        state = exc.state
    except ActivityTimedOut as exc:
        raise InvalidInput(f"{exc} (the heartbeat came too late)",
                           field="transition") from None
    return IntakeResult(Outcome.APPLIED, workflow_exec_id=wx, activity_exec_id=aeid,
                        transition=Command.HEARTBEAT.value, new_state=state)


def redrive(intake: Context, record: Mapping[str, Any], item: ActivityEventItem,
            wx: str) -> IntakeResult:
    """Redrive the run the row names; a redelivered row is recognised by its actor tag
    in the run's history."""
    engine, actor = intake.engine, actor_of(item)
    try:
        engine.feature(Redrive).redrive(wx, actor=actor)
    except NotAllowedNow:
        wf = engine.reads.workflow(wx)
        if not any(h.by == actor for h in wf.history):
            raise
        engine.feature(Redrive).followups(wf, engine.definitions.definition_of(wf))
        return IntakeResult(Outcome.DUPLICATE, workflow_exec_id=wx,
                            transition=Command.REDRIVE.value, new_state=wf.state.value)
    return IntakeResult(Outcome.APPLIED, workflow_exec_id=wx,
                        transition=Command.REDRIVE.value, new_state="RUNNING")


def signal(intake: Context, record: Mapping[str, Any], item: ActivityEventItem,
           wx: str) -> IntakeResult:
    if not item.signal:
        raise InvalidInput("a SIGNAL row needs signal (the signal's name)", field="signal")
    value = row_payload(intake.engine.store, item.payload, None, "payload")
    sent = intake.engine.feature(Waits).send(wx, item.signal, value,
                        signal_id=item.signal_id or item.activity_event_id)
    return IntakeResult(Outcome.DUPLICATE if sent.duplicate else Outcome.APPLIED,
                        workflow_exec_id=wx, activity_exec_id=sent.received_by,
                        transition=item.verb.value,
                        new_state="COMPLETED" if sent.received_by else KEPT)


def suspension(intake: Context, record: Mapping[str, Any], item: ActivityEventItem,
               wx: str) -> IntakeResult:
    """SUSPEND or RESUME the run the row names."""
    actor = actor_of(item)
    wf = intake.engine.reads.workflow(wx)
    if any(h.by == actor for h in wf.history):
        return IntakeResult(Outcome.DUPLICATE, workflow_exec_id=wx,
                            transition=item.verb.value, new_state=wf.state.value)
    paused = intake.engine.feature(Suspend)
    move = paused.suspend if item.verb is Command.SUSPEND else paused.resume
    wf = move(wx, actor=actor)
    return IntakeResult(Outcome.APPLIED, workflow_exec_id=wx, transition=item.verb.value,
                        new_state=wf.state.value)


def cancel(intake: Context, record: Mapping[str, Any], item: ActivityEventItem,
           aim: str) -> IntakeResult:
    """CANCEL: of one attempt (the contract's move), or, when the row names only
    ``workflow_exec_id``, of the whole run (as ``cancel_workflow``). A redelivered run
    cancel is recognised by its actor tag in the run's history.

    Raises:
        WorkflowAlreadyEnded: the run has ended (nothing to cancel).
    """
    if not addresses_run(item):
        return intake.move(record, item, aim)
    engine, actor = intake.engine, actor_of(item)
    wf = engine.reads.workflow(aim)
    if any(h.by == actor for h in wf.history):
        engine.ending.settle(aim)  # the earlier delivery may have died before settling
        return IntakeResult(Outcome.DUPLICATE, workflow_exec_id=aim,
                            transition=item.verb.value,
                            new_state=engine.reads.workflow(aim).state.value)
    if wf.state.is_terminal:
        raise WorkflowAlreadyEnded(workflow_exec_id=aim, workflow_state=wf.state.value)
    engine.ending.cancel(aim, actor=actor, again=True)  # not a redelivery: checked above
    return IntakeResult(Outcome.APPLIED, workflow_exec_id=aim, transition=item.verb.value,
                        new_state=engine.reads.workflow(aim).state.value)


def decision(intake: Context, record: Mapping[str, Any], item: ActivityEventItem,
             aeid: str) -> IntakeResult:
    """APPROVE or REJECT the approval the row names."""
    actor = actor_of(item)
    try:
        moved = intake.engine.feature(Waits).decide(aeid, approve=item.verb is Command.APPROVE,
                             by=item.by, comment=item.comment, actor=actor)
    except StateConflict as exc:
        return intake.not_applied(record, item, actor, exc, None, None)
    return IntakeResult(Outcome.APPLIED, workflow_exec_id=moved.workflow_exec_id,
                        activity_exec_id=aeid, transition=item.verb.value,
                        new_state=moved.state.value if moved.state else None)


def end_workflow(intake: Context, record: Mapping[str, Any], item: ActivityEventItem,
                 aeid: str) -> IntakeResult:
    """Complete the attempt and end its run COMPLETED with the row's output; a redelivered
    row is recognised by its actor tag in the attempt's history (its follow-ups redone)."""
    output = row_payload(intake.engine.store, item.output, item.output_ref, "output")
    actor = actor_of(item)
    try:
        moved = intake.engine.feature(Conditions).end_early(aeid, output, actor=actor,
                                     written_epoch=written_epoch(record))
    except (StateConflict, IllegalTransition) as exc:
        return intake.not_applied(record, item, actor, exc, output, None)
    # Another end of the run came first (another attempt's, a cancel): told so.
    lost = None if moved.ends_workflow else \
        "another end of the run came first: this row ended its attempt only"
    return IntakeResult(Outcome.APPLIED, workflow_exec_id=moved.workflow_exec_id,
                        activity_exec_id=aeid, transition=item.verb.value,
                        new_state=moved.state.value if moved.state else None, reason=lost)


#: Contract verbs whose row may name a whole run (only ``workflow_exec_id``).
RUN_VERBS = frozenset({Transition.CANCEL})

#: Every row verb that is not (only) a contract move, and how it is applied; the verbs
#: of the contract's other moves are applied by ``Intake.move``.
ROWS: Mapping[Command | Transition, Apply] = {
    Transition.CANCEL: cancel,
    Command.HEARTBEAT: heartbeat,
    Command.REDRIVE: redrive,
    Command.SIGNAL: signal,
    Command.APPROVE: decision,
    Command.REJECT: decision,
    Command.SUSPEND: suspension,
    Command.RESUME: suspension,
    Command.END_WORKFLOW: end_workflow,
}
