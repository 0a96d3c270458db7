"""Listings: runs (``Whimbrel.list_workflows``, ``count_workflows``; docs/architecture.md,
"Listing runs") and registered definitions (``list_definitions``).

Every listing reads KEYS_ONLY indexes of ``workflow_exec`` with Query (never Scan), then
fetches one page of items with BatchGetItem, so a page costs reads in proportion to its
size, not to the number of runs stored:

============================  ===============================================
filter                        partitions queried (each newest first)
============================  ===============================================
name and state(s)             ``by_name_state``: one per (state, write shard)
name                          ``by_name_state``: one per (state of the contract, shard)
state(s)                      ``by_name_state``: one per (registered name, state, shard)
nothing                       ``by_day``: one per write shard (every day in it)
============================  ===============================================

The registered names come from one Query of ``workflow_definition.all_names``. Every
key is write-sharded (``specs.NAME_STATE_SHARDS``, ``specs.BY_DAY_SHARDS``: a run's
entries land on the shard its id hashes to); the first read of every shard goes out at
once, and the shards are merged like any other partitions.

Each partition is a stream of ``(created_epoch, workflow_exec_id)``, read first a share
of ``limit + 1`` entries (twice its part of the page, but at least the 16 that the
cheapest Query holds anyway; ``first_batch``: the shards split the page between them)
and then, if the merge needs more of it, twice as many each time up to ``limit + 1``;
so a page of a thousand reads about two thousand entries, not one page per shard. The
streams are merged newest first, ties broken by the execution id. The cursor is
stateless: it names the last entry returned, and the next page asks each partition for
entries at or below its ``created_epoch`` and skips those already
returned. Because the merge order is global, that one position is every shard's
position too: no per-shard state rides in the cursor, and the cursor's forgery bounds
are unchanged. Runs created after the first page never show up on later pages; a run that
changes state while someone pages keeps its place (its ``created_epoch`` does not
change), so it is returned at most once.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from whimbrel.client.query_input import (
    DEFAULT_LOOKBACK_DAYS,
    MAX_PAGE,
    Cursor,
    Filters,
    Key,
    cursor_anchor,
    day_start,
    decode_cursor,
    encode_cursor,
    page_size,
    parse_filters,
    parse_time,
)
from whimbrel.contract import attributes as run_attributes
from whimbrel.contract import checks
from whimbrel.contract.states import WorkflowState
from whimbrel.engine import Clock, WorkflowExec
from whimbrel.store import specs
from whimbrel.store.keys import fan_out
from whimbrel.store.store import Store

__all__ = ["DEFAULT_LOOKBACK_DAYS", "MAX_PAGE", "DefinitionVersion", "WorkflowPage",
           "count_workflows", "cursor_anchor", "list_definitions", "list_workflows",
           "parse_time"]


StateArg = WorkflowState | str | Iterable[WorkflowState | str] | None
TimeArg = float | int | datetime | str | None


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
    items = store.cold.definition_versions(name) if name else store.cold.list_definitions()
    out = [DefinitionVersion(i.workflow_name, int(i.version), float(i.created_epoch),
                             i.description or "") for i in items]
    return sorted(out, key=lambda d: (d.workflow_name, -d.version))


# -- partitions ---------------------------------------------------------------------------

def _order(key: Key) -> tuple[float, str]:
    """Newest first, then by execution id."""
    return (-key[0], key[1])


class _Stream:
    """Entries of one index partition, newest first, read ``batch`` at a time as the
    merge needs them."""

    def __init__(self, store: Store, index: str, hash_keys: Iterable[str], *,
                 low: float | None, high: float | None, batch: int,
                 keep: Any) -> None:
        self.store, self.index, self.low, self.high = store, index, low, high
        self.batch, self.keep = batch, keep
        self.max_batch = batch
        self.partitions = deque(hash_keys)
        self.start_key: dict[str, Any] | None = None
        self.buffer: list[Key] = []
        #: Every entry newer than this is in the buffer (the partition is read newest
        #: first); entries *at* it may still follow in the next read.
        self.complete_above = math.inf

    def can_read(self) -> bool:
        return bool(self.partitions)

    def _read(self) -> None:
        page = self.store.query_workflow_keys(self.index, self.partitions[0], low=self.low,
                                              high=self.high, limit=self.batch,
                                              start_key=self.start_key)
        # A partition the merge comes back to holds more of the page than its share.
        self.batch = min(self.batch * 2, self.max_batch)
        self.buffer.extend(k for k in page.keys if self.keep(k))
        self.buffer.sort(key=_order)
        if page.last_key is None:
            # This partition is done: everything buffered is complete.
            self.partitions.popleft()
            self.start_key = None
            self.complete_above = -math.inf
        else:
            self.start_key = page.last_key
            self.complete_above = page.keys[-1][0] if page.keys else self.complete_above

    def head(self) -> Key | None:
        """The next entry, once every entry with its created_epoch has been read (so
        equal times come out in execution-id order, which the cursor relies on)."""
        while (not self.buffer or self.buffer[0][0] <= self.complete_above) and (
                self.can_read()):
            self._read()
        return self.buffer[0] if self.buffer else None

    def pop(self) -> None:
        self.buffer.pop(0)

    def has_more(self) -> bool:
        """Whether any entry follows (reads on only when nothing is buffered)."""
        while not self.buffer and self.can_read():
            self._read()
        return bool(self.buffer)


#: Entries a first Query asks for at least: a Query costs half a read unit for up to
#: 4 KB, some 30 keys-only entries, so asking for fewer saves nothing but risks a second
#: round trip.
MIN_FIRST_BATCH = 16


def first_batch(want: int, partitions: int) -> int:
    """How many entries the first Query of each of ``partitions`` asks for when the merge
    needs ``want``: twice an even share plus one (ties at the edge), at least
    ``MIN_FIRST_BATCH``, at most ``want``. Write shards split a page between them, so
    asking each for all of it would read ``partitions`` times the page."""
    return min(want, max(2 * -(-want // max(partitions, 1)) + 1, MIN_FIRST_BATCH))


def _any_more(streams: list[_Stream]) -> bool:
    """Whether any stream has an entry left: buffered ones first, then the streams that
    must read to tell, all at once."""
    if any(s.buffer for s in streams):
        return True
    return any(fan_out(lambda s: s.has_more(), [s for s in streams if s.can_read()]))


def _last_day(f: Filters, clock: Clock) -> datetime:
    """The newest UTC day an unfiltered listing covers: the day of the last instant
    before ``until`` (exclusive), else today (its lookback counts back from it)."""
    if f.until is not None:
        return day_start(math.nextafter(f.until, -math.inf))
    return day_start(clock())


def _streams(store: Store, f: Filters, *, high: float | None,
             floor: float | None, batch: int, keep: Any) -> list[_Stream]:
    def stream(index: str, keys: Iterable[str], low: float | None = f.since) -> _Stream:
        return _Stream(store, index, keys, low=low, high=high, batch=batch, keep=keep)

    if f.attributes:  # one attribute's index (the first by name); the rest are checked
        name, value = f.attributes[0]
        text = run_attributes.value_text(value)
        return [stream("by_attribute", [specs.attribute_key(name, text, k)])
                for k in range(specs.ATTRIBUTE_SHARDS)]
    if f.states and not f.name:  # one partition per (state, shard), whatever the names
        return [stream("by_state", [specs.state_key(s.value, k)])
                for s in f.states for k in range(specs.STATE_SHARDS)]
    if f.name or f.states:
        names = [f.name] if f.name else store.cold.workflow_names()
        states = f.states or tuple(WorkflowState)
        return [stream("by_name_state", [specs.name_state_key(n, s, k)])
                for n in names for s in states for k in range(specs.NAME_STATE_SHARDS)]
    return [stream("by_day", [specs.by_day_key(k)], low=floor)
            for k in range(specs.BY_DAY_SHARDS)]


def _day_floor(clock: Clock, f: Filters) -> float | None:
    """The oldest created_epoch a listing reads: ``since``, or for the by_day listing
    (no name, no state) the start of the DEFAULT_LOOKBACK_DAYS-th day back."""
    if f.since is not None or f.name or f.states or f.attributes:
        return f.since
    top = _last_day(f, clock)
    return (top - timedelta(days=DEFAULT_LOOKBACK_DAYS - 1)).timestamp()


def _keys(store: Store, clock: Clock, f: Filters, after: Cursor | None,
          want: int) -> tuple[list[Key], Key | None]:
    """Up to ``want`` entries after ``after``, merged newest first, without duplicates
    (an index read during a state change may list a run under both states), and the
    position the next page starts after (None when nothing follows). Each Query asks
    for ``want + 1`` entries, so that one read per partition usually shows both."""
    high = after.epoch if after else f.until
    floor = after.floor if after else _day_floor(clock, f)

    def keep(key: Key) -> bool:
        if f.until is not None and key[0] >= f.until:
            return False  # until is exclusive; BETWEEN is not
        # At the cursor's time, ids up to the cursor's were returned on an earlier page.
        return after is None or key[0] != after.epoch or key[1] > after.exec_id

    if floor is not None and high is not None and floor > high:
        return [], None
    streams = _streams(store, f, high=high, floor=floor, batch=want + 1, keep=keep)
    for s in streams:
        s.batch = first_batch(want + 1, len(streams))
    heap: list[tuple[tuple[float, str], int]] = []
    # Every write shard's first read at once (one round trip, not one per shard).
    for i, head in enumerate(fan_out(lambda s: s.head(), streams)):
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
    return out, (out[-1] if out and _any_more(streams) else None)


# -- entry points -------------------------------------------------------------------------

#: An attribute listing checks the name, states and other attributes on the runs' items:
#: when they drop some, it reads on, at most this many rounds for one page.
ATTRIBUTE_ROUNDS = 4


def list_workflows(store: Store, clock: Clock, *, name: str | None = None,
                   state: StateArg = None, since: TimeArg = None, until: TimeArg = None,
                   limit: int = 50, cursor: str | None = None,
                   attributes: Mapping[str, Any] | None = None) -> WorkflowPage:
    """One page of runs, newest first (see :meth:`whimbrel.Whimbrel.list_workflows`).

    Raises:
        InvalidInput: a bad name, state, time, attribute, limit or cursor (``field``
            names it).
    """
    # Ages ("2h") count from when the first page was read, so every page has one window.
    anchor = cursor_anchor(cursor) or clock()
    f = parse_filters(name, state, since, until, now=anchor, attributes=attributes)
    size = page_size(limit, "limit")
    after = decode_cursor(cursor, f)
    floor = after.floor if after else _day_floor(clock, f)
    items: list[WorkflowExec] = []
    for _ in range(ATTRIBUTE_ROUNDS if f.attributes else 1):
        page, position = _keys(store, clock, f, after, size - len(items))
        items += _runs(store, f, page)
        if position is None or len(items) >= size:
            break
        after = Cursor(position[0], position[1], floor, anchor)
    next_cursor = encode_cursor(position, floor, anchor, f) if position else None
    return WorkflowPage(tuple(items), next_cursor)


def _runs(store: Store, f: Filters, page: list[Key]) -> list[WorkflowExec]:
    """The runs of ``page`` (one BatchGetItem) that match the filters."""
    found = {w.workflow_exec_id: w for w in store.batch_get_workflows([k[1] for k in page])}
    want = dict(f.attributes)
    items = []
    for _, wx in page:
        item = found.get(wx)
        # The index is eventually consistent: drop a run that left the filter meanwhile
        # (or expired); its place is still behind the cursor. An attribute listing read
        # one attribute's index: the name and the other attributes are checked here
        # (and an entry whose run was never created is dropped).
        if item is None or (f.states and item.state not in f.states) \
                or (f.name and item.workflow_name != f.name) \
                or (want and not run_attributes.matches(
                    run_attributes.decode(item.attributes), want)):
            continue
        if item.input_apart:  # a large input is kept apart from the run's item
            item = replace(item, input=store.workflow_input(wx))
        # Payloads kept in S3 are read whole (once per process: store/blobs.py).
        item = replace(item, input=store.payload_text(item.input, "input"),
                       output=store.payload_text(item.output, "output"))
        items.append(WorkflowExec.from_record(item))
    return items


def count_workflows(store: Store, clock: Clock, *, name: str | None = None,
                    state: StateArg = None, since: TimeArg = None, until: TimeArg = None,
                    cap: int = MAX_PAGE, attributes: Mapping[str, Any] | None = None) -> int:
    """How many runs match, reading index keys only and at most ``cap`` of them: a
    result equal to ``cap`` means "``cap`` or more". With ``attributes`` the runs are
    read (their name, state and attributes are checked on them), page by page.

    Raises:
        InvalidInput: a bad name, state, time, attribute or cap.
    """
    f = parse_filters(name, state, since, until, now=clock(), attributes=attributes)
    cap = page_size(cap, "cap")
    if f.attributes:
        total, cursor = 0, None
        while total < cap:
            page = list_workflows(store, clock, name=name, state=state, since=since,
                                  until=until, limit=cap - total, cursor=cursor,
                                  attributes=attributes)
            total += len(page.items)
            if page.cursor is None:
                break
            cursor = page.cursor
        return min(total, cap)
    floor = _day_floor(clock, f)
    streams = _streams(store, f, high=f.until, floor=floor, batch=cap,
                       keep=lambda key: f.until is None or key[0] < f.until)
    # No order is needed, only the total: rounds of reads, every partition not yet
    # exhausted at once, each asking for an even share of what is still missing, so at
    # most ``cap`` entries (plus one per partition, rounding) in all.
    total = 0
    live = [s for s in streams if s.can_read()]
    while live and total < cap:
        share = -(-(cap - total) // len(live))
        for s in live:
            s.batch = share

        def read(s: _Stream) -> int:
            s._read()
            n = len(s.buffer)
            s.buffer.clear()
            return n
        total += sum(fan_out(read, live))
        live = [s for s in live if s.can_read()]
    return min(total, cap)
