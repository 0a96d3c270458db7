"""The engine-side adapter of the Simple Lambda API: one stream record in, one engine call.

The Lambda handlers (``lambdas/``) and the local runtime hand each DynamoDB-stream
record (Lambda's JSON shape) to :class:`Intake`. It parses the item image with the
Powertools parser (pydantic models below), calls :class:`~whimbrel.engine.Engine`,
and classifies what went wrong:

* a :class:`~whimbrel.contract.errors.WhimbrelError` with ``retryable`` set (throttling,
  timeouts) is raised again, so the handler reports a batch item failure and Lambda
  retries the record;
* anything else Whimbrel raises on purpose (malformed item, unknown workflow, illegal
  transition, oversized input) can never succeed: the record is **rejected** — a row in
  the ``rejection`` table says why — and the batch goes on.

Errors that are not ``WhimbrelError`` (bugs) propagate and are retried, then dead-lettered
by the event source mapping.

A redelivered event whose transition already happened is recognised by the actor tag
``event:<activity_event_id>`` the engine wrote into the activity's history; it is a
no-op that still runs :meth:`Engine.ensure_followups`.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from aws_lambda_powertools.utilities.parser import parse
from boto3.dynamodb.types import Binary, TypeDeserializer
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from whimbrel.contract.errors import (
    IllegalTransition,
    InvalidInput,
    StateConflict,
    WhimbrelError,
)
from whimbrel.contract.ids import parse_activity_exec_id, workflow_exec_id_for
from whimbrel.contract.states import Transition
from whimbrel.engine.engine import Engine, day_of
from whimbrel.store.models import RejectionModel
from whimbrel.store.store import Store

log = logging.getLogger("whimbrel.intake")

#: Suffix of the actor of a RUNNING move implied by a COMPLETED or FAILED report (see
#: ``Intake._end_ahead_of_running``).
IMPLIED_RUNNING = ":implied-running"

#: States from which a COMPLETED or FAILED report implies the RUNNING it skipped.
_BEFORE_RUNNING = frozenset({"READY", "QUEUED", "PREPARING"})
_ENDS = frozenset({Transition.COMPLETED, Transition.FAILED})

#: How long a rejection row is kept (DynamoDB TTL).
REJECTION_TTL_SECONDS = 30 * 24 * 3600
#: Where rejected records of each stream are recorded; the local runtime adds DEAD_LETTER.
SOURCE_WORKFLOW_REQUEST = "workflow_request"
SOURCE_ACTIVITY_EVENT = "activity_event"
SOURCE_DEAD_LETTER = "dead_letter"
_MAX_RECORD_CHARS = 100_000


class WorkflowRequestItem(BaseModel):
    """One ``workflow_request`` item as a raw client writes it (docs/simple-api.md)."""

    model_config = ConfigDict(extra="ignore")

    workflow_request_id: str = Field(min_length=1, max_length=512)
    workflow_name: str = Field(min_length=1, max_length=128)
    version: int | None = Field(default=None, ge=1)
    #: A JSON string or a native DynamoDB map/list/scalar.
    input: Any = None
    manual: StrictBool = False
    source: str | None = None
    when_epoch: float | None = None


class ActivityEventItem(BaseModel):
    """One ``activity_event`` item as a raw client writes it (docs/simple-api.md)."""

    model_config = ConfigDict(extra="ignore")

    activity_event_id: str = Field(min_length=1, max_length=512)
    activity_exec_id: str = Field(min_length=1, max_length=1024)
    transition: Transition
    activity_name: str | None = None
    workflow_exec_id: str | None = None
    workflow_name: str | None = None
    #: A JSON string or a native DynamoDB value.
    output: Any = None
    error: Any = None
    source: str | None = None
    when_epoch: float | None = None


class Outcome(StrEnum):
    STARTED = "STARTED"
    APPLIED = "APPLIED"
    DUPLICATE = "DUPLICATE"
    IGNORED = "IGNORED"
    REJECTED = "REJECTED"


@dataclass(frozen=True)
class IntakeResult:
    """What one record did; the handlers turn it into log lines and metrics."""

    outcome: Outcome
    workflow_exec_id: str | None = None
    activity_exec_id: str | None = None
    transition: Transition | None = None
    new_state: str | None = None
    reason: str | None = None
    #: True when another actor had moved the activity on (a TransitionConflict).
    conflict: bool = False


_deserializer = TypeDeserializer()


def _plain(value: Any) -> Any:
    """DynamoDB-deserialized data as JSON-friendly Python (Decimal → int/float)."""
    if isinstance(value, Decimal):
        if not value.is_finite():  # a hand-made record may say {"N": "Infinity"}
            raise InvalidInput(f"number {value} is not finite", field="input")
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(_plain(v) for v in value)
    if isinstance(value, bytes | bytearray | Binary):
        raise InvalidInput("binary attributes are not allowed in payloads", field="input")
    return value


def image_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record's ``dynamodb.NewImage`` as plain Python values.

    Raises:
        InvalidInput: the record has no image, or the image is not DynamoDB JSON.
    """
    image = _ddb(record).get("NewImage")
    if not isinstance(image, Mapping):
        raise InvalidInput("stream record has no dynamodb.NewImage", field="NewImage")
    out: dict[str, Any] = {}
    for name, typed in image.items():
        try:
            if isinstance(typed, Mapping) and set(typed) & {"B", "BS"}:
                typed = {k: [base64.b64decode(x) for x in v] if k == "BS"
                         else base64.b64decode(v) for k, v in typed.items()}
            out[str(name)] = _deserializer.deserialize(typed)
        except RecursionError:
            raise InvalidInput(f"attribute {name!r} is nested too deeply",
                               field=str(name)) from None
        except ArithmeticError as exc:  # decimal traps: {"N": "1e400"}, 39+ digits
            raise InvalidInput(f"attribute {name!r} holds a number DynamoDB cannot store "
                               f"({type(exc).__name__})", field=str(name)) from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise InvalidInput(f"attribute {name!r} is not DynamoDB JSON: {exc}",
                               field=str(name)) from exc
    return out


def _ddb(record: Mapping[str, Any]) -> Mapping[str, Any]:
    ddb = record.get("dynamodb")
    return ddb if isinstance(ddb, Mapping) else {}


def _native(value: Any, field: str) -> Any:
    """A native DynamoDB value (map, list, number, …) as plain Python data."""
    try:
        return _plain(value)
    except RecursionError:
        raise InvalidInput(f"{field} is nested too deeply", field=field) from None
    except InvalidInput as exc:
        raise InvalidInput(f"{field}: {exc}", field=field) from None


def _payload(value: Any, field: str) -> Any:
    """A payload stored as JSON text or as a native DynamoDB value, as Python data."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except RecursionError:
            raise InvalidInput(f"{field} is nested too deeply", field=field) from None
        except ValueError as exc:
            raise InvalidInput(f"{field} is a string but not JSON: {exc}", field=field) from exc
    return _native(value, field)


def record_keys(record: Mapping[str, Any]) -> dict[str, str]:
    """Ids worth logging from a record's image, read without validation."""
    image = _ddb(record).get("NewImage") or {}
    keys: dict[str, str] = {}
    if isinstance(image, Mapping):
        for name in ("workflow_request_id", "workflow_name", "workflow_exec_id",
                     "activity_exec_id", "activity_event_id", "transition"):
            typed = image.get(name)
            if isinstance(typed, Mapping) and isinstance(typed.get("S"), str):
                # Lone surrogates (only a hand-made event has them) cannot be logged.
                keys[name] = typed["S"].encode("utf-8", "backslashreplace").decode()[:1024]
    if "workflow_request_id" in keys and "workflow_exec_id" not in keys:
        try:
            keys["workflow_exec_id"] = workflow_exec_id_for(keys["workflow_request_id"])
        except InvalidInput:
            pass
    return keys


def _got(image: Mapping[str, Any], name: object) -> str:
    """What a raw item held in attribute ``name``, for a rejection message."""
    typed = image.get(name) if isinstance(name, str) else None
    if not isinstance(typed, Mapping) or len(typed) != 1:
        return ""
    tag, value = next(iter(typed.items()))
    if tag == "S" and isinstance(value, str):
        text = repr(value)
        return f" (got {text[:60]}{'...' if len(text) > 60 else ''})"
    return f" (got DynamoDB type {tag})"


def _describe_validation(exc: ValidationError, record: Mapping[str, Any]) -> str:
    image = _ddb(record).get("NewImage")
    image = image if isinstance(image, Mapping) else {}
    parts = []
    for err in exc.errors():
        loc = err.get("loc", ())
        where = ".".join(str(p) for p in loc) or "item"
        got = _got(image, loc[0]) if loc and err.get("type") != "missing" else ""
        parts.append(f"{where}: {err.get('msg')}{got}")
    return "invalid item: " + "; ".join(parts)


def record_rejection(store: Store, *, source: str, record: Mapping[str, Any], reason: str,
                     error_type: str, now: float) -> RejectionModel:
    """Write the rejection row for ``record`` (idempotent: a replay rewrites the same row).

    The id is derived from the record (creation time, source, sequence number), so the
    same record rejected twice leaves one row, and rows sort newest first within a day.
    """
    ddb = _ddb(record)
    created = ddb.get("ApproximateCreationDateTime")
    created_epoch = float(created) if isinstance(created, int | float | str | Decimal) else now
    seq = str(ddb.get("SequenceNumber") or record.get("eventID") or f"{now:.6f}")
    try:
        text = json.dumps(record, default=str, sort_keys=True)
    except (RecursionError, ValueError):
        # Too deep to keep whole: keep the envelope and the attribute names.
        image = ddb.get("NewImage")
        text = json.dumps({**{k: v for k, v in record.items() if k != "dynamodb"},
                           "dynamodb": {k: v for k, v in ddb.items() if k != "NewImage"},
                           "NewImage attributes": sorted(map(str, image))
                           if isinstance(image, Mapping) else None},
                          default=str, sort_keys=True)
    if len(text) > _MAX_RECORD_CHARS:
        text = text[:_MAX_RECORD_CHARS] + "...[cut]"
    item = store.models.rejection(
        day_of(created_epoch),
        f"{int(created_epoch * 1000):013d}-{source}-{seq}",
        source=source,
        reason=reason[:4000],
        error_type=error_type,
        record=text,
        when_epoch=now,
        expires_epoch=int(now + REJECTION_TTL_SECONDS),
    )
    store.put_rejection(item)
    return item


class Intake:
    """Turns stream records of the two Simple Lambda API tables into engine calls."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- workflow_request ----------------------------------------------------------------

    def workflow_request(self, record: Mapping[str, Any]) -> IntakeResult:
        """Start the workflow an inserted request asks for.

        Raises:
            WhimbrelError: only retryable ones (the record should be retried).
        """
        if record.get("eventName") != "INSERT":
            return IntakeResult(Outcome.IGNORED, reason="not an INSERT")
        try:
            item = parse(event=image_of(record), model=WorkflowRequestItem)
            if item.manual:
                return IntakeResult(Outcome.IGNORED, reason="manual request (Full Logic trace)")
            wx = workflow_exec_id_for(item.workflow_request_id)
            existed = self.engine.store.get_workflow(wx) is not None
            self.engine.start(item.workflow_name, _payload(item.input, "input"),
                              version=item.version, request_id=item.workflow_request_id,
                              source=item.source or "simple-api", write_request=False)
        except ValidationError as exc:
            return self._reject(SOURCE_WORKFLOW_REQUEST, record,
                                _describe_validation(exc, record), "ValidationError")
        except WhimbrelError as exc:
            if exc.retryable:
                raise
            return self._reject(SOURCE_WORKFLOW_REQUEST, record, str(exc), type(exc).__name__)
        return IntakeResult(Outcome.DUPLICATE if existed else Outcome.STARTED,
                            workflow_exec_id=wx)

    # -- activity_event --------------------------------------------------------------------

    def activity_event(self, record: Mapping[str, Any]) -> IntakeResult:
        """Apply the transition an inserted event reports, with its follow-ups.

        Raises:
            WhimbrelError: only retryable ones (the record should be retried).
        """
        if record.get("eventName") != "INSERT":
            return IntakeResult(Outcome.IGNORED, reason="not an INSERT")
        aeid: str | None = None
        try:
            item = parse(event=image_of(record), model=ActivityEventItem)
            aeid = item.activity_exec_id
            key = parse_activity_exec_id(aeid)
            self._check_event(item, key.workflow_exec_id, key.activity_name)
            actor = f"event:{item.activity_event_id}"
            try:
                moved = self.engine.transition(
                    aeid, item.transition, output=_payload(item.output, "output"),
                    error=item.error if item.error is None or isinstance(item.error, str)
                    else _native(item.error, "error"),
                    actor=actor)
            except (StateConflict, IllegalTransition) as exc:
                return self._not_applied(record, item, actor, exc)
        except ValidationError as exc:
            return self._reject(SOURCE_ACTIVITY_EVENT, record,
                                _describe_validation(exc, record), "ValidationError")
        except WhimbrelError as exc:
            if exc.retryable:
                raise
            return self._reject(SOURCE_ACTIVITY_EVENT, record, str(exc), type(exc).__name__,
                                activity_exec_id=aeid)
        return IntakeResult(Outcome.APPLIED, workflow_exec_id=moved.workflow_exec_id,
                            activity_exec_id=aeid, transition=item.transition,
                            new_state=moved.state.value)

    @staticmethod
    def _check_event(item: ActivityEventItem, wx: str, name: str) -> None:
        if item.transition is Transition.TIME_OUT:
            raise InvalidInput("TIME_OUT is applied only by the heartbeat listener",
                               field="transition")
        if item.workflow_exec_id is not None and item.workflow_exec_id != wx:
            raise InvalidInput(f"workflow_exec_id {item.workflow_exec_id!r} does not match "
                               f"activity_exec_id {item.activity_exec_id!r}",
                               field="workflow_exec_id")
        if item.activity_name is not None and item.activity_name != name:
            raise InvalidInput(f"activity_name {item.activity_name!r} does not match "
                               f"activity_exec_id {item.activity_exec_id!r}",
                               field="activity_name")

    def _not_applied(self, record: Mapping[str, Any], item: ActivityEventItem, actor: str,
                     exc: StateConflict | IllegalTransition) -> IntakeResult:
        aeid = item.activity_exec_id
        current = self.engine.store.get_activity(aeid)
        if current is not None and any(h.by == actor for h in (current.history or [])):
            # This very event was applied before (a redelivery); the earlier run may
            # have died before its follow-ups, so make sure they happened.
            self.engine.ensure_followups(aeid)
            return IntakeResult(Outcome.DUPLICATE, workflow_exec_id=current.workflow_exec_id,
                                activity_exec_id=aeid, transition=item.transition,
                                new_state=current.state)
        if current is not None and item.transition in _ENDS and \
                current.state in _BEFORE_RUNNING:
            return self._end_ahead_of_running(item, actor)
        if item.transition is Transition.RUNNING and current is not None and any(
                (h.by or "").endswith(IMPLIED_RUNNING) for h in (current.history or [])):
            # The RUNNING report arrives after a COMPLETED that already implied it.
            return IntakeResult(Outcome.DUPLICATE, workflow_exec_id=current.workflow_exec_id,
                                activity_exec_id=aeid, transition=item.transition,
                                new_state=current.state,
                                reason="RUNNING was implied by an earlier COMPLETED")
        if isinstance(exc, StateConflict):
            # Another actor moved the activity on first (e.g. the heartbeat listener
            # timed it out). The event can never apply; its follow-ups are the winner's.
            self.engine.ensure_followups(aeid)
            result = self._reject(SOURCE_ACTIVITY_EVENT, record, str(exc), "StateConflict",
                                  activity_exec_id=aeid)
            return IntakeResult(Outcome.REJECTED, workflow_exec_id=result.workflow_exec_id,
                                activity_exec_id=aeid, transition=item.transition,
                                reason=result.reason, conflict=True)
        return self._reject(SOURCE_ACTIVITY_EVENT, record, str(exc), type(exc).__name__,
                            activity_exec_id=aeid)

    def _end_ahead_of_running(self, item: ActivityEventItem, actor: str) -> IntakeResult:
        """A COMPLETED or FAILED report for an activity whose RUNNING report is not
        applied yet.

        Two event items of one activity can reach the handler out of order (on AWS they
        may sit in different stream shards). Reporting its end proves it ran, so the
        RUNNING move is applied first, by the same reporter, then the end; the late
        RUNNING event is then recognised as already implied. (Rejecting the end instead
        would leave the activity RUNNING once the late RUNNING lands, forever if it has
        no heartbeat timeout.)
        """
        aeid = item.activity_exec_id
        try:
            self.engine.transition(aeid, Transition.RUNNING, actor=actor + IMPLIED_RUNNING)
        except StateConflict:
            pass  # moved meanwhile (perhaps by that RUNNING event): the end decides
        moved = self.engine.transition(
            aeid, item.transition, output=_payload(item.output, "output"),
            error=item.error if item.error is None or isinstance(item.error, str)
            else _native(item.error, "error"),
            actor=actor)
        return IntakeResult(Outcome.APPLIED, workflow_exec_id=moved.workflow_exec_id,
                            activity_exec_id=aeid, transition=item.transition,
                            new_state=moved.state.value)

    # -- rejection -----------------------------------------------------------------------

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
