"""The ``activity_event`` stream's handler: an inserted event row applies the transition
(or command) it reports, with its follow-ups.

A contract move goes through ``engine.moves.transition`` with the row's output encoded
once; another verb is a row kind of ``ROWS`` (rows.py). A redelivered event whose
transition already happened is recognised by the actor tag ``event:<activity_event_id>``
in the activity's history (DUPLICATE, its follow-ups made sure of); a COMPLETED or
FAILED report that overtook its RUNNING one implies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.utilities.parser import parse

from whimbrel.contract.errors import ActivityTimedOut, IllegalTransition, StateConflict
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.states import (
    ACTIVITY_TRANSITIONS,
    ActivityState,
    Transition,
    activity_sources,
)
from whimbrel.engine import tracing
from whimbrel.engine.intake.decode import image_of, native, row_payload, written_epoch
from whimbrel.engine.intake.items import ActivityEventItem
from whimbrel.engine.intake.result import IntakeResult, Outcome
from whimbrel.engine.intake.rows import ROWS, actor_of, target
from whimbrel.engine.intake.skeleton import SOURCE_ACTIVITY_EVENT, Handler, Seen

#: Suffix of the actor of a RUNNING move implied by a COMPLETED or FAILED report (see
#: ``Intake._end_ahead_of_running``).
IMPLIED_RUNNING = ":implied-running"

A = ActivityState
#: States from which a COMPLETED or FAILED report implies the RUNNING it skipped: those
#: RUNNING is reached from (READY, QUEUED, PREPARING).
_BEFORE_RUNNING = activity_sources(Transition.RUNNING)
#: The verbs that end a running attempt (COMPLETED, FAILED).
_ENDS = frozenset(t for (s, t), n in ACTIVITY_TRANSITIONS.items()
                  if s is A.RUNNING and n.is_terminal and t is not Transition.TIME_OUT)


class EventRows(Handler):
    """Applies each inserted ``activity_event`` row (the row kinds' context, rows.py)."""

    source = SOURCE_ACTIVITY_EVENT
    id_field = "activity_event_id"
    marks_applied = True

    def mark(self, row_id: str, result: IntakeResult, record: Mapping[str, Any]) -> None:
        self.skeleton.marks.event(row_id, result, record)

    def apply(self, record: Mapping[str, Any], seen: Seen) -> IntakeResult:
        item = parse(event=image_of(record), model=ActivityEventItem)
        seen.row_id, seen.activity_exec_id = item.activity_event_id, item.activity_exec_id
        with tracing.continued(item.traceparent):  # the reporter's trace
            aim = target(item)  # the ids the verb needs, checked
            kind = ROWS.get(item.verb)
            if kind is not None:
                return kind(self, record, item, aim)
            return self.move(record, item, aim)

    def move(self, record: Mapping[str, Any], item: ActivityEventItem,
             aim: str) -> IntakeResult:
        """Apply the contract move a row reports to the attempt ``aim``."""
        verb = item.verb
        assert isinstance(verb, Transition)
        # The whole row is checked before anything is applied: its output too.
        # Encoded once here; the engine writes this text as it is.
        output = self.engine.reads.limits.encode(
            row_payload(self.engine.store, item.output, item.output_ref, "output"), "output")
        error = item.error if item.error is None or isinstance(item.error, str) \
            else native(item.error, "error")
        actor = actor_of(item)
        written = written_epoch(record)
        try:
            moved = self.engine.moves.transition(aim, verb, output_json=output, error=error,
                                           error_type=item.error_type, actor=actor,
                                           written_epoch=written)
        except (StateConflict, IllegalTransition) as exc:
            return self.not_applied(record, item, actor, exc, output, error)
        except ActivityTimedOut as late:  # given up on: kept as late output, not applied
            return IntakeResult(Outcome.LATE_OUTPUT, activity_exec_id=aim,
                                workflow_exec_id=parse_activity_exec_id(aim).workflow_exec_id,
                                transition=verb.value, new_state=late.state,
                                reason=f"late output: {late}" + _written(written))
        return IntakeResult(Outcome.APPLIED, workflow_exec_id=moved.workflow_exec_id,
                            activity_exec_id=aim, transition=verb.value,
                            new_state=moved.state.value)

    def not_applied(self, record: Mapping[str, Any], item: ActivityEventItem, actor: str,
                     exc: StateConflict | IllegalTransition, output: Any,
                     error: Any) -> IntakeResult:
        aeid = str(item.activity_exec_id)  # checked by rows.target
        verb = item.verb
        current = exc.current if isinstance(exc, StateConflict) and exc.current else \
            self.engine.store.get_activity(aeid)
        if current is not None and any(h.by == actor for h in current.history):
            # This very event was applied before (a redelivery); the earlier run may
            # have died before its follow-ups, so make sure they happened.
            self.engine.moves.ensure_followups(aeid)
            return IntakeResult(Outcome.DUPLICATE, workflow_exec_id=current.workflow_exec_id,
                                activity_exec_id=aeid, transition=verb.value,
                                new_state=_value(current.state))
        if current is not None and verb in _ENDS and current.state in _BEFORE_RUNNING:
            return self._end_ahead_of_running(item, actor, output, error)
        if verb is Transition.RUNNING and current is not None and any(
                (h.by or "").endswith(IMPLIED_RUNNING) for h in current.history):
            # The RUNNING report arrives after a COMPLETED that already implied it.
            return IntakeResult(Outcome.DUPLICATE, workflow_exec_id=current.workflow_exec_id,
                                activity_exec_id=aeid, transition=verb.value,
                                new_state=_value(current.state),
                                reason="RUNNING was implied by an earlier COMPLETED")
        if isinstance(exc, StateConflict):
            # Another actor moved the activity on first (e.g. the heartbeat listener
            # timed it out). The event can never apply; its follow-ups are the winner's.
            self.engine.moves.ensure_followups(aeid)
            result = self.skeleton.reject(SOURCE_ACTIVITY_EVENT, record, str(exc),
                                          "StateConflict", activity_exec_id=aeid)
            return IntakeResult(Outcome.REJECTED, workflow_exec_id=result.workflow_exec_id,
                                activity_exec_id=aeid, transition=verb.value,
                                new_state=_value(current.state) if current else None,
                                reason=result.reason, conflict=True)
        return self.skeleton.reject(SOURCE_ACTIVITY_EVENT, record, str(exc),
                                    type(exc).__name__, activity_exec_id=aeid)

    def _end_ahead_of_running(self, item: ActivityEventItem, actor: str, output: Any,
                              error: Any) -> IntakeResult:
        """A COMPLETED or FAILED report for an activity whose RUNNING report is not
        applied yet.

        Two event items of one activity can reach the handler out of order (on AWS they
        may sit in different stream shards). Reporting its end proves it ran, so the
        RUNNING move is applied first, by the same reporter (and under the same guards),
        then the end; the late RUNNING event is then recognised as already implied.
        """
        aeid = str(item.activity_exec_id)  # checked by rows.target
        verb = item.verb
        assert isinstance(verb, Transition)
        try:
            self.engine.moves.transition(aeid, Transition.RUNNING, actor=actor + IMPLIED_RUNNING)
        except StateConflict:
            pass  # moved meanwhile (perhaps by that RUNNING event): the end decides
        moved = self.engine.moves.transition(aeid, verb, output_json=output, error=error,
                                       error_type=item.error_type, actor=actor)
        return IntakeResult(Outcome.APPLIED, workflow_exec_id=moved.workflow_exec_id,
                            activity_exec_id=aeid, transition=verb.value,
                            new_state=moved.state.value)


def _written(epoch: float | None) -> str:
    if epoch is None:
        return ""
    when = datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="seconds")
    return f" (the row was written at {when}, DynamoDB's time)"


def _value(state: ActivityState | None) -> str | None:
    return state.value if state is not None else None
