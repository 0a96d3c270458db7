"""The engine-side adapter of the Simple Lambda API: one stream record in, one engine call.

The Lambda handlers (``lambdas/``) and the local runtime hand each DynamoDB-stream
record (Lambda's JSON shape) to :class:`Intake`. It parses the whole item first
(``items.py``, ``decode.py``) — ids, verb, payload sizes — so a row is validated whole
before anything is applied, calls :class:`~whimbrel.engine.engine.Engine` (whose guards
hold for rows as for every caller), and classifies what went wrong:

* a :class:`~whimbrel.contract.errors.WhimbrelError` with ``retryable`` set (throttling,
  timeouts) is raised again, so the handler reports a batch item failure and Lambda
  retries the record;
* anything else Whimbrel raises on purpose (malformed item, unknown workflow, illegal
  transition, a guard, oversized input) can never succeed: the record is **rejected** —
  a row in the ``rejection`` table says why — and the batch goes on.

Every processed row is marked with what happened to it (``outcome``, ``result_state``,
``reason``, ``processed_epoch``) and when it expires, so its sender can read it back.
A row written again under the same id (a MODIFY record) is rejected as a re-used id;
the run keeps what started it. A redelivered event whose transition already happened is
recognised by the actor tag ``event:<activity_event_id>`` in the activity's history.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.utilities.parser import parse
from pydantic import ValidationError

from whimbrel.contract.errors import (
    ActivityTimedOut,
    IllegalTransition,
    InvalidInput,
    StateConflict,
    WhimbrelError,
)
from whimbrel.contract.ids import parse_activity_exec_id, workflow_exec_id_for
from whimbrel.contract.states import (
    ACTIVITY_TRANSITIONS,
    ActivityState,
    Transition,
    activity_sources,
)
from whimbrel.engine import tracing
from whimbrel.engine.engine import Engine
from whimbrel.engine.intake import marks
from whimbrel.engine.intake.decode import (
    REJECTION_TTL_SECONDS,
    ddb_part,
    describe_validation,
    image_of,
    native,
    record_keys,
    record_rejection,
    row_payload,
    written_epoch,
)
from whimbrel.engine.intake.items import BOOKKEEPING, ActivityEventItem, WorkflowRequestItem
from whimbrel.engine.intake.result import IntakeResult, Outcome
from whimbrel.engine.intake.rows import ROWS, actor_of, target

__all__ = [
    "IMPLIED_RUNNING",
    "REJECTION_TTL_SECONDS",
    "SOURCE_ACTIVITY_EVENT",
    "SOURCE_DEAD_LETTER",
    "SOURCE_WORKFLOW_REQUEST",
    "Intake",
    "IntakeResult",
    "Outcome",
    "image_of",
    "record_keys",
    "record_rejection",
]

log = logging.getLogger("whimbrel.intake")

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

#: Where rejected records of each stream are recorded; the local runtime adds DEAD_LETTER.
SOURCE_WORKFLOW_REQUEST = "workflow_request"
SOURCE_ACTIVITY_EVENT = "activity_event"
SOURCE_DEAD_LETTER = "dead_letter"


class Intake:
    """Turns stream records of the two Simple Lambda API tables into engine calls."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.marks = marks.RowMarks(engine)

    # -- workflow_request ----------------------------------------------------------------

    def workflow_request(self, record: Mapping[str, Any]) -> IntakeResult:
        """Start the workflow an inserted request asks for.

        Raises:
            WhimbrelError: only retryable ones (the record should be retried).
        """
        event = record.get("eventName")
        if event == "MODIFY":
            return self._reused(SOURCE_WORKFLOW_REQUEST, record)
        if event != "INSERT":
            return IntakeResult(Outcome.IGNORED, reason=f"a {event} record")
        request_id: str | None = None
        try:
            item = parse(event=image_of(record), model=WorkflowRequestItem)
            if item.manual:
                return IntakeResult(Outcome.IGNORED, reason="manual request (Full Logic trace)")
            request_id = item.workflow_request_id
            refuse_future(item.when_epoch, self.engine.clock())
            wx = workflow_exec_id_for(request_id)
            input_ = row_payload(self.engine.store, item.input, item.input_ref, "input")
            attributes = row_payload(self.engine.store, item.attributes, None, "attributes")
            with tracing.continued(item.traceparent):  # the requester's trace
                # No read first: the start's conditional create says whether the run
                # was there (a redelivered request: DUPLICATE).
                started = self.engine.starting.start(
                    item.workflow_name, input_, version=item.version, request_id=request_id,
                    source=item.source or "simple-api", write_request=False,
                    priority=item.priority, attributes=attributes)
        except ValidationError as exc:
            result = self._reject(SOURCE_WORKFLOW_REQUEST, record,
                                  describe_validation(exc, record), "ValidationError")
            self.marks.unparsed(record, "workflow_request_id", self.marks.request, result)
            return result
        except WhimbrelError as exc:
            if exc.retryable:
                raise
            result = self._reject(SOURCE_WORKFLOW_REQUEST, record, str(exc),
                                  type(exc).__name__)
            if request_id is not None:
                self.marks.request(request_id, result, record)
            return result
        return IntakeResult(Outcome.STARTED if started.created else Outcome.DUPLICATE,
                            workflow_exec_id=wx)

    # -- activity_event --------------------------------------------------------------------

    def activity_event(self, record: Mapping[str, Any]) -> IntakeResult:
        """Apply the transition (or command) an inserted event reports, with follow-ups.

        Raises:
            WhimbrelError: only retryable ones (the record should be retried).
        """
        event = record.get("eventName")
        if event == "MODIFY":
            return self._reused(SOURCE_ACTIVITY_EVENT, record)
        if event != "INSERT":
            return IntakeResult(Outcome.IGNORED, reason=f"a {event} record")
        aeid: str | None = None
        event_id: str | None = None
        try:
            item = parse(event=image_of(record), model=ActivityEventItem)
            event_id, aeid = item.activity_event_id, item.activity_exec_id
            with tracing.continued(item.traceparent):  # the reporter's trace
                result = self._apply_event(record, item)
        except ValidationError as exc:
            result = self._reject(SOURCE_ACTIVITY_EVENT, record,
                                  describe_validation(exc, record), "ValidationError")
            if event_id is None:
                self.marks.unparsed(record, "activity_event_id", self.marks.event, result)
                return result
        except WhimbrelError as exc:
            if exc.retryable:
                raise
            result = self._reject(SOURCE_ACTIVITY_EVENT, record, str(exc),
                                  type(exc).__name__, activity_exec_id=aeid)
        if event_id is not None:
            self.marks.event(event_id, result, record)
        return result

    def _apply_event(self, record: Mapping[str, Any], item: ActivityEventItem) -> IntakeResult:
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
            result = self._reject(SOURCE_ACTIVITY_EVENT, record, str(exc), "StateConflict",
                                  activity_exec_id=aeid)
            return IntakeResult(Outcome.REJECTED, workflow_exec_id=result.workflow_exec_id,
                                activity_exec_id=aeid, transition=verb.value,
                                new_state=_value(current.state) if current else None,
                                reason=result.reason, conflict=True)
        return self._reject(SOURCE_ACTIVITY_EVENT, record, str(exc), type(exc).__name__,
                            activity_exec_id=aeid)

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

    # -- re-used ids, rejection, marks --------------------------------------------------------

    def _reused(self, source: str, record: Mapping[str, Any]) -> IntakeResult:
        """A MODIFY record: the row was written again under the same id."""
        ddb = ddb_part(record)
        old, new = ddb.get("OldImage"), ddb.get("NewImage")
        if isinstance(old, Mapping) and isinstance(new, Mapping) and _same(old, new):
            return IntakeResult(Outcome.IGNORED, reason="Whimbrel's own bookkeeping")
        keys = record_keys(record)
        if source == SOURCE_WORKFLOW_REQUEST:
            rid = keys.get("workflow_request_id", "?")
            reason = (f"workflow_request_id {rid!r} was written again with other content; "
                      "an id names one request forever, so the new content was not "
                      f"applied. The id belongs to run {keys.get('workflow_exec_id', '?')}, "
                      "started from the earlier content (kept on the run, and in this "
                      "rejection's record as OldImage). Write a new id to start another run.")
        else:
            reason = (f"activity_event_id {keys.get('activity_event_id', '?')!r} was written "
                      "again with other content; an id names one event forever, so the new "
                      "content was not applied. It belongs to activity "
                      f"{keys.get('activity_exec_id', '?')} (the earlier content is in this "
                      "rejection's record as OldImage). Write a new id for a new event.")
        result = self._reject(source, record, reason, "ReusedId",
                              activity_exec_id=keys.get("activity_exec_id"))
        if source == SOURCE_ACTIVITY_EVENT and "activity_event_id" in keys:
            self.marks.event(keys["activity_event_id"], result, record)
        elif "workflow_request_id" in keys:
            self.marks.request(keys["workflow_request_id"], result, record)
        return result

    def _reject(self, source: str, record: Mapping[str, Any], reason: str, error_type: str,
                *, activity_exec_id: str | None = None) -> IntakeResult:
        keys = record_keys(record)
        log.warning("rejected %s record %s: %s", source, record.get("eventID"), reason)
        record_rejection(self.engine.store, source=source, record=record, reason=reason,
                         error_type=error_type, now=self.engine.clock())
        wx = keys.get("workflow_exec_id")
        if wx is None and activity_exec_id:
            try:
                wx = parse_activity_exec_id(activity_exec_id).workflow_exec_id
            except InvalidInput:
                wx = None
        return IntakeResult(Outcome.REJECTED, workflow_exec_id=wx,
                            activity_exec_id=activity_exec_id, reason=reason)


#: How far in the future a request row's ``when_epoch`` may lie (writers' clock skew).
WHEN_SLACK_SECONDS = 300.0


def refuse_future(when_epoch: float | None, now: float) -> None:
    """A request row starts its run at once: one dated later is refused rather than
    started early (a later start is a schedule's job: docs/schedules.md).

    Raises:
        InvalidInput: ``when_epoch`` more than :data:`WHEN_SLACK_SECONDS` after now.
    """
    if when_epoch is not None and when_epoch > now + WHEN_SLACK_SECONDS:
        raise InvalidInput(
            f"when_epoch {when_epoch:.0f} is in the future (now {now:.0f}): a request row "
            "starts its workflow when it is written, so it is refused rather than started "
            "early; to start later use a schedule (create_schedule with start_at/end_at, "
            "or write the row at that time)", field="when_epoch")


def _same(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """True when two images differ only in Whimbrel's bookkeeping attributes."""
    def strip(image: Mapping[str, Any]) -> str:
        return json.dumps({k: v for k, v in image.items() if k not in BOOKKEEPING},
                          sort_keys=True, default=str)
    return strip(old) == strip(new)


def _written(epoch: float | None) -> str:
    if epoch is None:
        return ""
    when = datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="seconds")
    return f" (the row was written at {when}, DynamoDB's time)"


def _value(state: ActivityState | None) -> str | None:
    return state.value if state is not None else None
