"""The one skeleton both stream handlers run a record through (``requests.py`` for
``workflow_request`` rows, ``events.py`` for ``activity_event`` rows): decode, apply,
and — whatever goes wrong — reject with a recorded message and go on, so a bad record
never blocks the records behind it.

* An INSERT is applied; a MODIFY is a re-used id (rejected, unless only Whimbrel's
  bookkeeping changed); a REMOVE (the row's expiry) is ignored.
* A :class:`~whimbrel.contract.errors.WhimbrelError` with ``retryable`` set (throttling,
  timeouts) is raised again, so the handler reports a batch item failure and Lambda
  retries the record.
* Anything else Whimbrel raises on purpose (a malformed item, an unknown workflow, an
  illegal transition, a guard, an oversized input) can never succeed: the record is
  **rejected** — a row in the ``rejection`` table says why — and marked on its row
  (``marks.py``) when its id is known.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from whimbrel.contract.errors import InvalidInput, WhimbrelError
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.engine.engine import Engine
from whimbrel.engine.intake import marks
from whimbrel.engine.intake.decode import (
    ddb_part,
    describe_validation,
    record_keys,
    record_rejection,
)
from whimbrel.engine.intake.items import BOOKKEEPING
from whimbrel.engine.intake.result import IntakeResult, Outcome

log = logging.getLogger("whimbrel.intake")

#: Where rejected records of each stream are recorded; the local runtime adds DEAD_LETTER.
SOURCE_WORKFLOW_REQUEST = "workflow_request"
SOURCE_ACTIVITY_EVENT = "activity_event"
SOURCE_DEAD_LETTER = "dead_letter"

#: Marks a row with what happened to it: ``(row_id, result, record)``.
Mark = Callable[[str, IntakeResult, Mapping[str, Any]], None]


@dataclass
class Seen:
    """What a handler learned of its row before something went wrong (the id to mark
    it by, the attempt it names)."""

    row_id: str | None = None
    activity_exec_id: str | None = None


class StreamRows(Protocol):
    """One stream's rows, as the skeleton runs them."""

    #: The stream (and the ``source`` of its rejections).
    source: str
    #: The row's key attribute (to mark a row whose item could not be parsed).
    id_field: str
    #: Whether a row applied without an error is marked here (a request row's start
    #: marks nothing more: its run is its outcome).
    marks_applied: bool

    def mark(self, row_id: str, result: IntakeResult, record: Mapping[str, Any]) -> None: ...

    def apply(self, record: Mapping[str, Any], seen: Seen) -> IntakeResult:
        """Decode an inserted row and apply it (``seen``: filled in as it is learned)."""
        ...


class Skeleton:
    """Runs one stream record through its rows' ``apply``, and rejects what fails."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.marks = marks.RowMarks(engine)

    def take(self, rows: StreamRows, record: Mapping[str, Any]) -> IntakeResult:
        """What happened to ``record``.

        Raises:
            WhimbrelError: only retryable ones (the record should be retried).
        """
        event = record.get("eventName")
        if event == "MODIFY":
            return self.reused(rows, record)
        if event != "INSERT":
            return IntakeResult(Outcome.IGNORED, reason=f"a {event} record")
        seen = Seen()
        try:
            result = rows.apply(record, seen)
        except ValidationError as exc:
            result = self.reject(rows.source, record, describe_validation(exc, record),
                                 "ValidationError")
            if seen.row_id is None:
                self.marks.unparsed(record, rows.id_field, rows.mark, result)
                return result
        except WhimbrelError as exc:
            if exc.retryable:
                raise
            result = self.reject(rows.source, record, str(exc), type(exc).__name__,
                                 activity_exec_id=seen.activity_exec_id)
        else:
            if not rows.marks_applied:
                return result
        if seen.row_id is not None:
            rows.mark(seen.row_id, result, record)
        return result

    def reused(self, rows: StreamRows, record: Mapping[str, Any]) -> IntakeResult:
        """A MODIFY record: the row was written again under the same id."""
        ddb = ddb_part(record)
        old, new = ddb.get("OldImage"), ddb.get("NewImage")
        if isinstance(old, Mapping) and isinstance(new, Mapping) and _same(old, new):
            return IntakeResult(Outcome.IGNORED, reason="Whimbrel's own bookkeeping")
        keys = record_keys(record)
        if rows.source == SOURCE_WORKFLOW_REQUEST:
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
        result = self.reject(rows.source, record, reason, "ReusedId",
                             activity_exec_id=keys.get("activity_exec_id"))
        if rows.id_field in keys:
            rows.mark(keys[rows.id_field], result, record)
        return result

    def reject(self, source: str, record: Mapping[str, Any], reason: str, error_type: str,
               *, activity_exec_id: str | None = None) -> IntakeResult:
        """Record why ``record`` can never apply (the ``rejection`` table) and go on."""
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


def _same(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """True when two images differ only in Whimbrel's bookkeeping attributes."""
    def strip(image: Mapping[str, Any]) -> str:
        return json.dumps({k: v for k, v in image.items() if k not in BOOKKEEPING},
                          sort_keys=True, default=str)
    return strip(old) == strip(new)



class Handler:
    """What both stream handlers share: the skeleton they run on and ``handle``; each
    says its stream (``source``, ``id_field``, ``marks_applied``), ``mark`` and ``apply``
    (:class:`StreamRows`)."""

    source: str
    id_field: str
    marks_applied: bool

    def __init__(self, skeleton: Skeleton) -> None:
        self.skeleton = skeleton
        self.engine = skeleton.engine

    def handle(self, record: Mapping[str, Any]) -> IntakeResult:
        """Apply an inserted row (and its follow-ups), or reject it with a recorded
        message.

        Raises:
            WhimbrelError: only retryable ones (the record should be retried).
        """
        return self.skeleton.take(self, record)

    def mark(self, row_id: str, result: IntakeResult, record: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def apply(self, record: Mapping[str, Any], seen: Seen) -> IntakeResult:
        raise NotImplementedError
