"""Marks written on a row that must fit it (pure; issue 31): DynamoDB refuses an update
that would take an item past 400 KB, so a row written close to that could not be marked
(its verdict lost, its record retried and dead-lettered; a request row's expiry at its
run's end failed and the run could not end). :func:`fit` builds the marks to fit the row:

1. the **verdict** (what must be written: outcome, result state, when, expiry) always;
   it is small and bounded;
2. the **reason**, cut to what room is left (at most :data:`MAX_REASON_BYTES`; the
   rejection row keeps it longer);
3. when not even the verdict fits, the row's largest attributes (never its key) are
   removed until it does, and the reason names them: the row was refused or applied
   already (its content is in the rejection row, cut, or in the run), and its sender
   reads the verdict where it looks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from whimbrel.contract.ddbjson import item_size, to_ddb
from whimbrel.contract.limits import MAX_ITEM_BYTES
from whimbrel.contract.records import REMOVE

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
