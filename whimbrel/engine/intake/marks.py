"""Writing the marks of the Simple API rows the intake processed (issue 31): the verdict
and reason, made to fit the row as its stream image shows it
(:func:`whimbrel.contract.marks.fit`); when DynamoDB still refuses the update, again with
room freed for the verdict. docs/simple-api.md, "What Whimbrel writes back on your row".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from whimbrel.contract.errors import StoreError, WhimbrelError
from whimbrel.contract.marks import fit
from whimbrel.engine import rules
from whimbrel.engine.intake.decode import ddb_part
from whimbrel.engine.intake.result import IntakeResult, Outcome

if TYPE_CHECKING:
    from whimbrel.engine.engine import Engine

log = logging.getLogger("whimbrel.intake")

#: DynamoDB's limit on a partition key value: a longer id can name no row.
MAX_KEY_BYTES = 2048

Mark = Callable[[str, IntakeResult, Mapping[str, Any]], None]


class RowMarks:
    """Writes the marks of the rows the intake processed (a part of ``Intake``)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def event(self, event_id: str, result: IntakeResult, record: Mapping[str, Any]) -> None:
        self._mark(self.engine.store.cold.mark_event, "activity_event_id", event_id, result,
                   record)

    def request(self, request_id: str, result: IntakeResult,
                record: Mapping[str, Any]) -> None:
        self._mark(self.engine.store.cold.mark_request, "workflow_request_id", request_id,
                   result, record)

    def unparsed(self, record: Mapping[str, Any], key: str, mark: Mark,
                 result: IntakeResult) -> None:
        """Mark a row that failed validation (its sender polls it for ``outcome``), when
        its key can be read from the raw image. A key that is itself malformed cannot
        address the row: the rejection record is then the only trace, and the records
        behind it go on."""
        image = ddb_part(record).get("NewImage")
        typed = image.get(key) if isinstance(image, Mapping) else None
        value = typed.get("S") if isinstance(typed, Mapping) else None
        if not isinstance(value, str) or not value:
            return
        try:
            if len(value.encode("utf-8")) > MAX_KEY_BYTES:
                return
        except UnicodeEncodeError:
            return  # lone surrogates: no item can have this key
        try:
            mark(value, result, record)  # conditional on the row existing (store._mark)
        except WhimbrelError as exc:
            if exc.retryable:
                raise
            log.warning("could not mark rejected %s row %r: %s", key, value[:200], exc)

    def _mark(self, write: Callable[[str, dict[str, Any]], None], key: str, row_id: str,
              result: IntakeResult, record: Mapping[str, Any]) -> None:
        """Mark a row with ``result``, made to fit it (:func:`fit`); when DynamoDB still
        finds the update too large, again with room freed for the verdict."""
        image = ddb_part(record).get("NewImage")
        image = image if isinstance(image, Mapping) else None
        verdict = self._verdict(result)
        try:
            write(row_id, fit(verdict, result.reason, image, key))
        except StoreError as exc:
            if exc.aws_code != "ValidationException" or image is None:
                raise
            log.warning("mark of %s %r refused (%s): freeing room on the row", key,
                        row_id[:200], exc)
            write(row_id, fit(verdict, result.reason, image, key, no_room=True))

    def _verdict(self, result: IntakeResult) -> dict[str, Any]:
        now = self.engine.clock()
        changes: dict[str, Any] = {"outcome": result.outcome.value, "processed_epoch": now}
        if result.new_state:
            changes["result_state"] = result.new_state
        expires = rules.expiry(now, self._retention(result))
        if expires is not None:
            changes["expires_epoch"] = expires
        return changes

    def _retention(self, result: IntakeResult) -> float | None:
        default = None if self.engine.retention_days is None \
            else self.engine.retention_days * 86400.0
        if result.activity_exec_id and result.outcome is not Outcome.REJECTED:
            known = self.engine.known.remembered(result.activity_exec_id)
            if known is not None and known.workflow_version is not None:
                defs = self.engine.definitions
                return defs.retention(defs.definition_of(known))
        return default
