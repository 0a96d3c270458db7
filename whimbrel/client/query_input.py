"""Arguments of the run listings: the filters, page sizes, times a person typed, and the
opaque cursor (``list_workflows`` and ``count_workflows`` in :mod:`whimbrel.client.query`).

Everything here is pure; every bad value becomes an ``InvalidInput`` naming its field.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from whimbrel.contract import attributes as run_attributes
from whimbrel.contract import checks
from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.states import WorkflowState

#: Without ``since``, a listing with neither name nor state walks back this many UTC
#: days (one Query each, from ``until`` or today), then stops.
DEFAULT_LOOKBACK_DAYS = 30
#: The largest page (and count) one call returns.
MAX_PAGE = 1000

Key = tuple[float, str]  # (created_epoch, workflow_exec_id)


@dataclass(frozen=True)
class Filters:
    """Checked filters: ``since`` inclusive, ``until`` exclusive, in epoch seconds."""

    name: str | None
    states: tuple[WorkflowState, ...]
    since: float | None
    until: float | None
    #: The times as given: an age ("2h") is the same filter on every page, whatever
    #: number it resolves to.
    given: tuple[Any, Any] = (None, None)
    #: Attributes every run listed has (name, value), by name.
    attributes: tuple[tuple[str, Any], ...] = ()

    def fingerprint(self) -> str:
        text = json.dumps([self.name, [s.value for s in self.states], *self.given,
                           *([list(map(list, self.attributes))] if self.attributes else [])])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Cursor:
    """Where the previous page stopped: its last entry (or a day boundary)."""

    epoch: float
    exec_id: str
    #: The oldest created_epoch the walk reads (fixed by page one, so paging across
    #: midnight keeps the same window).
    floor: float | None
    #: When page one was listed: what relative times ("2h") on later pages are
    #: resolved against (see cursor_anchor).
    anchor: float


def parse_filters(name: Any, state: Any, since: Any, until: Any, *, now: float,
                  attributes: Any = None) -> Filters:
    """Check the filters of a listing; text times (see :func:`parse_time`) are resolved
    against ``now``.

    Raises:
        InvalidInput: a bad name, state, time or attribute, or since after until.
    """
    attrs = tuple(sorted(run_attributes.check(attributes).items()))
    if name is not None:
        checks.workflow_name(name, "name")
    states = _states(state)
    low, high = _epoch(since, "since", now), _epoch(until, "until", now)
    if low is not None and high is not None and low > high:
        raise InvalidInput(f"since ({low}) is after until ({high})", field="since")
    given = tuple(v if isinstance(v, str) else t for v, t in ((since, low), (until, high)))
    return Filters(name, states, low, high, (given[0], given[1]), attrs)


def _states(value: Any) -> tuple[WorkflowState, ...]:
    items = [value] if isinstance(value, str | WorkflowState) else value
    if value is None:
        return ()
    known = ", ".join(s.value for s in WorkflowState)
    try:
        listed = list(items)
    except TypeError:
        raise InvalidInput(f"state must be a WorkflowState or a collection of them, not "
                           f"{value!r}"[:200], field="state") from None
    if not listed:
        raise InvalidInput("state must name at least one state (or be None for all)",
                           field="state")
    out: list[WorkflowState] = []
    for item in listed:
        if not isinstance(item, str) or item.upper() not in WorkflowState.__members__:
            raise InvalidInput(f"unknown workflow state {item!r} (known: {known})"[:300],
                               field="state")
        st = WorkflowState(item.upper())
        if st not in out:
            out.append(st)
    return tuple(out)


def _epoch(value: Any, field: str, now: float) -> float | None:
    if isinstance(value, str):
        return parse_time(value, now, field)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidInput(f"{field} must be a timezone-aware datetime (e.g. "
                               f"tzinfo=UTC), not the naive {value.isoformat()}", field=field)
        return value.timestamp()
    out = checks.epoch(value, field)
    if out is not None and math.isinf(out):
        raise InvalidInput(f"{field} must be finite epoch seconds, not {value!r}", field=field)
    return out


def page_size(value: Any, field: str) -> int:
    """A page size or cap: an int from 1 to MAX_PAGE.

    Raises:
        InvalidInput: anything else.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PAGE:
        raise InvalidInput(f"{field} must be an integer from 1 to {MAX_PAGE}, not {value!r}",
                           field=field)
    return int(value)


_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_time(text: str, now: float, field: str) -> float:
    """A time a person typed: epoch seconds (``1795219200``), an ISO 8601 date or time
    (``2026-11-21``, ``2026-11-21T09:00:00Z``; UTC unless it names a zone), or an age
    (``90s``, ``15m``, ``2h``, ``7d``, ``1w``: that long before ``now``).

    Raises:
        InvalidInput: none of these; ``field`` names the option.
    """
    value = text.strip()
    rel = _RELATIVE.match(value.lower())
    try:
        if rel:
            return now - float(rel.group(1)) * _UNITS[rel.group(2)]
        if re.fullmatch(r"\d+(\.\d+)?", value):
            return float(value)
        when = datetime.fromisoformat(value)
    except ValueError:
        when = None
    if when is None:
        raise InvalidInput(f"{field} {text!r} is not a time: use epoch seconds, an ISO "
                           "date or time (2026-11-21, 2026-11-21T09:00Z) or an age "
                           "(30m, 2h, 7d)", field=field)
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


# -- cursor --------------------------------------------------------------------------------

def encode_cursor(key: Key, floor: float | None, anchor: float, filters: Filters) -> str:
    body = {"v": 1, "e": key[0], "x": key[1], "f": floor, "t": anchor,
            "q": filters.fingerprint()}
    raw = json.dumps(body, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: Any, filters: Filters) -> Cursor | None:
    """The position a cursor names, checked against the listing's filters.

    Raises:
        InvalidInput: not a cursor a listing returned, or one of a listing with other
            filters.
    """
    if cursor is None:
        return None
    bad = InvalidInput(f"cursor {str(cursor)[:80]!r} is not a cursor list_workflows "
                       "returned", field="cursor")
    if not isinstance(cursor, str) or not cursor or len(cursor) > 2048:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        body = json.loads(raw)
        epoch, exec_id, floor = _cursor_time(body["e"]), body["x"], body["f"]
        anchor = _cursor_time(body["t"])
        ok = (body["v"] == 1 and isinstance(exec_id, str) and exec_id and epoch is not None
              and anchor is not None and (floor is None or _cursor_time(floor) is not None))
    except (binascii.Error, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        raise bad from None
    if not ok:
        raise bad
    assert epoch is not None and anchor is not None
    if body.get("q") != filters.fingerprint():
        raise InvalidInput("cursor belongs to a listing with other filters (name, state, "
                           "since, until): pass the same filters as for the first page",
                           field="cursor")
    floor = None if floor is None else float(floor)
    # The fingerprint is no secret: check what a forged cursor could abuse, such as a
    # floor far back that would widen an unfiltered listing past its lookback.
    walk = not (filters.name or filters.states or filters.attributes)
    if filters.since is not None:
        ok = floor == filters.since and epoch >= filters.since
    elif walk:
        ok = floor is not None and day_start(epoch).timestamp() - floor <= (
            DEFAULT_LOOKBACK_DAYS + 1) * 86400
    else:
        ok = floor is None
    if not ok or (filters.until is not None and epoch > filters.until):
        raise bad
    return Cursor(epoch, exec_id, floor, anchor)


def cursor_anchor(cursor: str | None) -> float | None:
    """When the first page of the listing ``cursor`` continues was read, or None (no
    cursor, or not one). Resolve relative times ("since 2h") against it on later pages,
    so that they name the same window as on the first page."""
    if not isinstance(cursor, str) or not cursor or len(cursor) > 2048:
        return None
    try:
        body = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return _cursor_time(body["t"])
    except (binascii.Error, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None


#: The latest time a cursor may carry: the end of year 9999, the last one ``datetime``
#: can show. A forged ``1e300`` (or a 400-digit integer) would overflow the day walk.
MAX_CURSOR_EPOCH = 253402300799.0


def _cursor_time(value: Any) -> float | None:
    """A time read from a cursor: a JSON number (not a bool, not text) from 0 to
    MAX_CURSOR_EPOCH, else None (NaN and infinities included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int) and not 0 <= value <= MAX_CURSOR_EPOCH:
        return None  # before float(): a huge int would raise OverflowError
    out = float(value)
    return out if math.isfinite(out) and 0 <= out <= MAX_CURSOR_EPOCH else None


def day_start(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC).replace(hour=0, minute=0, second=0,
                                                      microsecond=0)
