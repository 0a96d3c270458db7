"""The marks written back on a Simple API row, made to fit the row (issue 31).

A row's sender reads what happened to it from the row itself (``outcome``,
``result_state``, ``reason``, ``processed_epoch``, ``expires_epoch``:
docs/simple-api.md). DynamoDB refuses an update that would take the item past 400 KB,
so a row written within a few hundred bytes of that could not be marked: the refusal
was retried, dead-lettered, and the sender polled forever. So the marks are built to
fit the row as its stream image shows it:

1. the **verdict** (outcome, result state, when, expiry) always; it is small and
   bounded;
2. the **reason**, cut to what room is left (at most :data:`MAX_REASON_BYTES`; the
   rejection row keeps it longer);
3. when not even the verdict fits, the row's largest attributes (never its key) are
   removed until it does, and the reason names them: the row was refused or applied
   already, its content is in the rejection row (cut) or in the run, and its sender
   learns the verdict where it looks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from whimbrel.contract.ddbjson import item_size, to_ddb
from whimbrel.contract.errors import StoreError, WhimbrelError
from whimbrel.contract.limits import MAX_ITEM_BYTES
from whimbrel.contract.records import REMOVE
from whimbrel.engine import rules
from whimbrel.engine.intake.decode import ddb_part
from whimbrel.engine.intake.result import IntakeResult, Outcome

if TYPE_CHECKING:
    from whimbrel.engine.engine import Engine

log = logging.getLogger("whimbrel.intake")

#: DynamoDB's limit on a partition key value: a longer id can name no row.
MAX_KEY_BYTES = 2048
#: The most of a reason a row's mark holds (UTF-8 bytes).
MAX_REASON_BYTES = 1000
#: Left free under DynamoDB's limit: its sizes of numbers are approximate.
SIZE_MARGIN = 64
#: The room a note on removed attributes needs at least.
_NOTE_BYTES = 200
#: Freed on top when DynamoDB refused a mark the estimate allowed.
_SLACK_BYTES = 1024


def fit(verdict: Mapping[str, Any], reason: str | None, image: Mapping[str, Any] | None,
        key: str, *, no_room: bool = False) -> dict[str, Any]:
    """The changes that mark a row: ``verdict``, then as much of ``reason`` as fits.

    Args:
        verdict: the attributes that must be written (plain values).
        reason: the reason, cut to fit (None: none).
        image: the row as written (DynamoDB JSON; None when unknown: nothing is cut but
            the reason's bound).
        key: the row's key attribute, never removed.
        no_room: act as if not even the verdict fitted (DynamoDB refused the mark that
            the size estimate allowed).
    """
    changes: dict[str, Any] = dict(verdict)
    kept = {k: v for k, v in (image or {}).items()
            if k not in changes and k != "reason" and isinstance(k, str)}
    room = MAX_ITEM_BYTES - SIZE_MARGIN - item_size(kept) - _size(changes)
    if image is None:
        room = MAX_REASON_BYTES + len("reason")
    removed: list[str] = []
    if no_room or room < 0:
        # Not even the verdict fits: the largest attributes make way (never the key),
        # until the verdict and a note naming them fit. After a refusal the estimate is
        # not trusted: what it said was left counts for nothing, and more is freed.
        want = len("reason") + _NOTE_BYTES + (_SLACK_BYTES if no_room else 0)
        room = min(room, 0) if no_room else room
        others = sorted(((k, v) for k, v in kept.items() if k != key),
                        key=lambda kv: -item_size({kv[0]: kv[1]}))
        for name, av in others:
            if room >= want:
                break
            size = item_size({name: av})
            changes[name] = REMOVE
            removed.append(f"{name} ({size:,} bytes)")
            room += size
    if removed:
        reason = ("removed from this row to make room for this mark (DynamoDB's 400 KB "
                  f"item limit): {', '.join(removed)}" + (f"; {reason}" if reason else ""))
    if reason:
        text = cut_utf8(reason, min(MAX_REASON_BYTES, room - len("reason")))
        if text:
            changes["reason"] = text
    return changes


def cut_utf8(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` UTF-8 bytes, ending in "…" when cut ("" if even
    that does not fit)."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    if limit < 4:
        return ""
    return data[:limit - 3].decode("utf-8", "ignore") + "…"


def _size(changes: Mapping[str, Any]) -> int:
    return item_size({k: to_ddb(v) for k, v in changes.items() if v is not REMOVE})


Mark = Callable[[str, IntakeResult, Mapping[str, Any]], None]


class RowMarks:
    """Writes the marks of the rows the intake processed (a part of ``Intake``)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def event(self, event_id: str, result: IntakeResult, record: Mapping[str, Any]) -> None:
        self._mark(self.engine.store.mark_event, "activity_event_id", event_id, result,
                   record)

    def request(self, request_id: str, result: IntakeResult,
                record: Mapping[str, Any]) -> None:
        self._mark(self.engine.store.mark_request, "workflow_request_id", request_id,
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
            known = self.engine.remembered(result.activity_exec_id)
            if known is not None and known.workflow_version is not None:
                return self.engine.retention(self.engine.definition_of(known))
        return default
