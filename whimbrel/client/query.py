"""Listings: runs (``Whimbrel.list_workflows``, ``count_workflows``; docs/architecture.md,
"Listing runs") and registered definitions (``list_definitions``).

Every listing reads KEYS_ONLY indexes of ``workflow_exec`` with Query (never Scan), then
fetches one page of items with BatchGetItem, so a page costs reads in proportion to its
size, not to the number of runs stored:

============================  ===============================================
filter                        partitions queried (each newest first)
============================  ===============================================
name and state(s)             ``by_name_state``: one per state
state(s)                      ``by_state``: one per (state, shard)
name                          ``by_name``: one
nothing                       ``by_day``: one UTC day after the other, newest first
============================  ===============================================

Each partition is a stream of ``(created_epoch, workflow_exec_id)`` read ``limit + 1``
entries at a time; the streams are merged newest first, ties broken by the execution
id. The cursor is stateless: it names the last entry returned, and the next page asks
each partition for entries at or below its ``created_epoch`` and skips those already
returned. Runs created after the first page never show up on later pages; a run that
changes state while someone pages keeps its place (its ``created_epoch`` does not
change), so it is returned at most once.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import json
import math
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from whimbrel.contract import checks
from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.states import WorkflowState
from whimbrel.engine.ports import Clock
from whimbrel.engine.views import WorkflowExec
from whimbrel.store import specs
from whimbrel.store.store import Store

__all__ = ["DEFAULT_LOOKBACK_DAYS", "MAX_PAGE", "DefinitionVersion", "WorkflowPage",
           "count_workflows", "list_definitions", "list_workflows", "parse_time"]

#: Without ``since``, a listing with neither name nor state walks back this many UTC
#: days (one Query each, from ``until`` or today), then stops.
DEFAULT_LOOKBACK_DAYS = 30
#: The largest page (and count) one call returns.
MAX_PAGE = 1000

Key = tuple[float, str]  # (created_epoch, workflow_exec_id)
StateArg = WorkflowState | str | Iterable[WorkflowState | str] | None
TimeArg = float | int | datetime | None


@dataclass(frozen=True)
class WorkflowPage:
    """One page of runs, newest first, without their activities.

    ``cursor`` fetches the next page (pass it back with the same filters); it is None on
    the last page. A page may hold fewer than ``limit`` runs and still have a cursor
    when runs left the requested state(s) after the index was read.
    """

    items: tuple[WorkflowExec, ...]
    cursor: str | None


@dataclass(frozen=True)
class DefinitionVersion:
    """One registered version of a workflow definition (without its activities)."""

    workflow_name: str
    version: int
    registered_epoch: float
    description: str


def list_definitions(store: Store, name: str | None = None) -> list[DefinitionVersion]:
    """Registered versions, by name then newest version first: one Query for ``name``,
    else a read of the whole (small) definition table, as `whimbrel definitions list`
    does; never on a run's path.

    Raises:
        InvalidInput: ``name`` is not a workflow name.
    """
    if name is not None:
        checks.workflow_name(name, "name")
    items = store.definition_versions(name) if name else store.list_definitions()
    out = [DefinitionVersion(i.workflow_name, int(i.version), float(i.created_epoch),
                             i.description or "") for i in items]
    return sorted(out, key=lambda d: (d.workflow_name, -d.version))


@dataclass(frozen=True)
class _Filters:
    name: str | None
    states: tuple[WorkflowState, ...]
    since: float | None
    until: float | None

    def fingerprint(self) -> str:
        text = json.dumps([self.name, [s.value for s in self.states], self.since, self.until])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class _Cursor:
    epoch: float
    exec_id: str
    #: The oldest created_epoch the walk reads (fixed by page one, so paging across
    #: midnight keeps the same window).
    floor: float | None


def _filters(name: Any, state: Any, since: Any, until: Any) -> _Filters:
    if name is not None:
        checks.workflow_name(name, "name")
    states = _states(state)
    low, high = _epoch(since, "since"), _epoch(until, "until")
    if low is not None and high is not None and low > high:
        raise InvalidInput(f"since ({low}) is after until ({high})", field="since")
    return _Filters(name, states, low, high)


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


def _epoch(value: Any, field: str) -> float | None:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidInput(f"{field} must be a timezone-aware datetime (e.g. "
                               f"tzinfo=UTC), not the naive {value.isoformat()}", field=field)
        return value.timestamp()
    out = checks.epoch(value, field)
    if out is not None and math.isinf(out):
        raise InvalidInput(f"{field} must be finite epoch seconds, not {value!r}", field=field)
    return out


def _limit(value: Any, field: str) -> int:
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

def _encode_cursor(key: Key, floor: float | None, filters: _Filters) -> str:
    body = {"v": 1, "e": key[0], "x": key[1], "f": floor, "q": filters.fingerprint()}
    raw = json.dumps(body, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: Any, filters: _Filters) -> _Cursor | None:
    if cursor is None:
        return None
    bad = InvalidInput(f"cursor {str(cursor)[:80]!r} is not a cursor list_workflows "
                       "returned", field="cursor")
    if not isinstance(cursor, str) or not cursor or len(cursor) > 2048:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        body = json.loads(raw)
        epoch, exec_id, floor = float(body["e"]), body["x"], body["f"]
        ok = (body["v"] == 1 and isinstance(exec_id, str) and exec_id
              and math.isfinite(epoch) and (floor is None or isinstance(floor, int | float)))
    except (binascii.Error, ValueError, TypeError, KeyError, AttributeError):
        raise bad from None
    if not ok:
        raise bad
    if body.get("q") != filters.fingerprint():
        raise InvalidInput("cursor belongs to a listing with other filters (name, state, "
                           "since, until): pass the same filters as for the first page",
                           field="cursor")
    return _Cursor(epoch, exec_id, None if floor is None else float(floor))


# -- partitions ---------------------------------------------------------------------------

def _order(key: Key) -> tuple[float, str]:
    """Newest first, then by execution id."""
    return (-key[0], key[1])


class _Stream:
    """Entries of one index partition (or, for ``by_day``, of consecutive days), newest
    first, read ``batch`` at a time as the merge needs them."""

    def __init__(self, store: Store, index: str, hash_keys: Iterable[str], *,
                 low: float | None, high: float | None, batch: int,
                 keep: Any) -> None:
        self.store, self.index, self.low, self.high = store, index, low, high
        self.batch, self.keep = batch, keep
        self.partitions = deque(hash_keys)
        self.start_key: dict[str, Any] | None = None
        self.buffer: list[Key] = []
        #: Every entry newer than this is in the buffer (the partition is read newest
        #: first); entries *at* it may still follow in the next read.
        self.complete_above = math.inf

    def _read(self) -> None:
        page = self.store.query_workflow_keys(self.index, self.partitions[0], low=self.low,
                                              high=self.high, limit=self.batch,
                                              start_key=self.start_key)
        self.buffer.extend(k for k in page.keys if self.keep(k))
        self.buffer.sort(key=_order)
        if page.last_key is None:
            # This partition is done; a following one (an older day) holds only older
            # entries, so everything buffered is complete.
            self.partitions.popleft()
            self.start_key = None
            self.complete_above = -math.inf
        else:
            self.start_key = page.last_key
            self.complete_above = page.keys[-1][0] if page.keys else self.complete_above

    def head(self) -> Key | None:
        """The next entry, once every entry with its created_epoch has been read (so
        equal times come out in execution-id order, which the cursor relies on)."""
        while self.partitions and (not self.buffer or
                                   self.buffer[0][0] <= self.complete_above):
            self._read()
        return self.buffer[0] if self.buffer else None

    def pop(self) -> None:
        self.buffer.pop(0)

    def has_more(self) -> bool:
        """Whether any entry follows (reads on only when nothing is buffered)."""
        while not self.buffer and self.partitions:
            self._read()
        return bool(self.buffer)


def _last_day(f: _Filters, after: _Cursor | None, clock: Clock) -> datetime:
    """The newest UTC day the by_day walk reads: the cursor's, else the day of the last
    instant before ``until`` (exclusive), else today."""
    if after is not None:
        return _day(after.epoch)
    if f.until is not None:
        return _day(math.nextafter(f.until, -math.inf))
    return _day(clock())


def _day(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC).replace(hour=0, minute=0, second=0,
                                                      microsecond=0)


def _streams(store: Store, f: _Filters, *, high: float | None, top: datetime,
             floor: float | None, batch: int, keep: Any) -> list[_Stream]:
    def stream(index: str, keys: Iterable[str], low: float | None = f.since) -> _Stream:
        return _Stream(store, index, keys, low=low, high=high, batch=batch, keep=keep)

    if f.name and f.states:
        return [stream("by_name_state", [specs.name_state_key(f.name, s)]) for s in f.states]
    if f.states:
        return [stream("by_state", [specs.state_shard_key(s, n)])
                for s in f.states for n in range(specs.STATE_SHARDS)]
    if f.name:
        return [stream("by_name", [f.name])]
    assert floor is not None  # _day_floor always bounds the by_day walk
    bottom = _day(floor)
    days = []
    day = top
    while day >= bottom:
        days.append(day.strftime("%Y-%m-%d"))
        day -= timedelta(days=1)
    return [stream("by_day", days, low=floor)]


def _day_floor(clock: Clock, f: _Filters) -> float | None:
    """The oldest created_epoch a listing reads: ``since``, or for the by_day walk
    (no name, no state) the start of the DEFAULT_LOOKBACK_DAYS-th day back."""
    if f.since is not None or f.name or f.states:
        return f.since
    top = _last_day(f, None, clock)
    return (top - timedelta(days=DEFAULT_LOOKBACK_DAYS - 1)).timestamp()


def _keys(store: Store, clock: Clock, f: _Filters, after: _Cursor | None,
          want: int) -> tuple[list[Key], bool]:
    """Up to ``want`` entries after ``after``, merged newest first, without duplicates
    (an index read during a state change may list a run under both states), and
    whether more follow. Each Query asks for ``want + 1`` entries, so that one read per
    partition usually shows both."""
    high = after.epoch if after else f.until
    floor = after.floor if after else _day_floor(clock, f)

    def keep(key: Key) -> bool:
        if f.until is not None and key[0] >= f.until:
            return False  # until is exclusive; BETWEEN is not
        # At the cursor's time, ids up to the cursor's were returned on an earlier page.
        return after is None or key[0] != after.epoch or key[1] > after.exec_id

    if floor is not None and high is not None and floor > high:
        return [], False
    streams = _streams(store, f, high=high, top=_last_day(f, after, clock), floor=floor,
                       batch=want + 1, keep=keep)
    heap: list[tuple[tuple[float, str], int]] = []
    for i, s in enumerate(streams):
        head = s.head()
        if head is not None:
            heap.append((_order(head), i))
    heapq.heapify(heap)
    out: list[Key] = []
    while heap:
        _, i = heapq.heappop(heap)
        key = streams[i].buffer[0]  # its head, complete since it was pushed
        streams[i].pop()
        if not out or out[-1] != key:
            out.append(key)
        if len(out) == want:
            break  # no head() now: it could read on just to order an entry not wanted
        nxt = streams[i].head()
        if nxt is not None:
            heapq.heappush(heap, (_order(nxt), i))
    # A duplicate of the last entry is not "more"; drop it before asking.
    for s in streams:
        while out and s.buffer and s.buffer[0] == out[-1]:
            s.pop()
    return out, any(s.has_more() for s in streams)


# -- entry points -------------------------------------------------------------------------

def list_workflows(store: Store, clock: Clock, *, name: str | None = None,
                   state: StateArg = None, since: TimeArg = None, until: TimeArg = None,
                   limit: int = 50, cursor: str | None = None) -> WorkflowPage:
    """One page of runs, newest first (see :meth:`whimbrel.Whimbrel.list_workflows`).

    Raises:
        InvalidInput: a bad name, state, time, limit or cursor (``field`` names it).
    """
    f = _filters(name, state, since, until)
    size = _limit(limit, "limit")
    after = _decode_cursor(cursor, f)
    page, more = _keys(store, clock, f, after, size)
    found = {w.workflow_exec_id: w for w in store.batch_get_workflows([k[1] for k in page])}
    items = []
    for _, wx in page:
        item = found.get(wx)
        # The index is eventually consistent: drop a run that left the filter meanwhile
        # (or expired); its place is still behind the cursor.
        if item is None or (f.states and item.state not in f.states):
            continue
        items.append(WorkflowExec.from_model(item))
    floor = after.floor if after else _day_floor(clock, f)
    next_cursor = _encode_cursor(page[-1], floor, f) if more else None
    return WorkflowPage(tuple(items), next_cursor)


def count_workflows(store: Store, clock: Clock, *, name: str | None = None,
                    state: StateArg = None, since: TimeArg = None, until: TimeArg = None,
                    cap: int = MAX_PAGE) -> int:
    """How many runs match, reading index keys only and at most ``cap`` of them: a
    result equal to ``cap`` means "``cap`` or more".

    Raises:
        InvalidInput: a bad name, state, time or cap.
    """
    f = _filters(name, state, since, until)
    cap = _limit(cap, "cap")
    floor = _day_floor(clock, f)
    streams = _streams(store, f, high=f.until, top=_last_day(f, None, clock), floor=floor,
                       batch=cap, keep=lambda key: f.until is None or key[0] < f.until)
    # No order is needed, only the total: read the partitions one after the other, each
    # Query asking only for what is still missing, so at most ``cap`` entries in all.
    total = 0
    for stream in streams:
        while total < cap:
            stream.batch = cap - total
            if not stream.has_more():
                break
            total += len(stream.buffer)
            stream.buffer.clear()
    return min(total, cap)
