"""Activity attempts: ``activity_exec`` (a run's activities, in the run's partition) and
``map_item`` (a map's items, in partitions of their own).

The attempts part (core): its methods are ``Store``'s own (the engine's core
``StorePort``), with the runs part (:mod:`whimbrel.store.runs`).

Where an attempt lives follows from its id (``<wx>:<activity>:<attempt>``): an item of
a map (``<wx>:<map>#<i>:<attempt>``) is in ``map_item`` under
``<wx>/<map>/<i mod MAP_ITEM_PARTITIONS>``, any other attempt in ``activity_exec`` under
``<wx>``. So ``get_activity`` is one GetItem and every write one UpdateItem, as before,
and a wide map spreads its writes over ``MAP_ITEM_PARTITIONS`` keys instead of its run's
one (docs/architecture.md, "Maps").

Maps expanded before ``map_item`` existed keep their items in the run's partition. The
store tells them apart without any marker: an item id read or written where it should be
and not found there is looked for in the run's partition (one more request, only on such
a miss); an item is created in the run's partition when its map already has items there
(one Query per map and process, remembered). Listings read both places.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from whimbrel.contract.dataflow import ITEM_MARK, items_prefix, split_item
from whimbrel.contract.errors import StateConflict
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.records import ActivityRecord, Change, Changes, Due
from whimbrel.contract.states import ActivityState
from whimbrel.store import spec_core
from whimbrel.store.codec import Expression, Item, activity_record, record_item, to_ddb
from whimbrel.store.errors import ConditionLost
from whimbrel.store.keys import (
    WORKER_SHARD_PREFIX,
    fan_out,
    index_changes,
    is_priority_entry,
    item_partition,
)
from whimbrel.store.plumbing import DUE_KEYS_LIMIT, Tables

__all__ = ["Attempts", "Place"]

#: Maps this store remembers the place of (their items beside the run or apart).
KNOWN_MAPS = 4096


@dataclass(frozen=True)
class Place:
    """Where one attempt is (or is to be) stored."""

    logical: str
    table: str
    key: Item


class Attempts:
    """Attempts of one table prefix: a core part, whose methods are ``Store``'s own (the
    engine's core ``StorePort``). Thread-safe."""

    #: Shards of the sparse ``timers`` index (of both tables).
    timer_shards: tuple[str, ...] = tuple(str(i) for i in range(spec_core.TIMER_SHARDS))

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        # (run, map) -> True: its items are in the run's partition (expanded before
        # map_item existed); False: in map_item. Learnt, never guessed.
        self._beside: OrderedDict[tuple[str, str], bool] = OrderedDict()
        self._beside_lock = threading.Lock()
        #: How many times this store put an attempt on a priority shard: a claim that
        #: finds it changed since its last read of every priority shard reads them all
        #: again (engine/claims.py), so work this process readied is served in order.
        self.priority_written = 0
        self._priority_writes = itertools.count(1)

    def indexed(self, changes: Changes, activity_exec_id: str) -> dict[str, Any]:
        """:func:`index_changes` of an attempt's change set, counting a priority entry
        (``priority_written``; counted before the write: one that loses costs a claim one
        more read, never a missed entry)."""
        out = index_changes(changes, activity_exec_id)
        if is_priority_entry(out):
            self.priority_written = next(self._priority_writes)
        return out

    # -- places ------------------------------------------------------------------------

    def _places(self, activity_exec_id: str) -> list[Place]:
        """Where ``activity_exec_id`` may be, the likelier place first."""
        key = parse_activity_exec_id(activity_exec_id)
        wx, aeid = key.workflow_exec_id, {"S": activity_exec_id}
        run = Place("activity_exec", self.tables.activity_table,
                    {"workflow_exec_id": {"S": wx}, "activity_exec_id": aeid})
        base, index = split_item(key.activity_name)
        if index is None:
            return [run]
        own = Place("map_item", self.tables.item_table,
                    {"item_partition": {"S": item_partition(wx, base, index)},
                     "activity_exec_id": aeid})
        beside = self._known_beside(wx, base)
        return [own, run] if beside is None else [run] if beside else [own]

    def _known_beside(self, wx: str, map_name: str) -> bool | None:
        with self._beside_lock:
            return self._beside.get((wx, map_name))

    def _learn_beside(self, wx: str, map_name: str, beside: bool) -> None:
        with self._beside_lock:
            self._beside[(wx, map_name)] = beside
            self._beside.move_to_end((wx, map_name))
            while len(self._beside) > KNOWN_MAPS:
                self._beside.popitem(last=False)

    def _items_beside_run(self, wx: str, map_name: str) -> bool:
        """Whether the items of ``map_name`` are in the run's partition (one consistent
        Query, Limit 1, the first time this store creates an item of that map)."""
        known = self._known_beside(wx, map_name)
        if known is not None:
            return known
        found = any(True for _ in self.tables.query(self._run_query(
            wx, items_prefix(map_name)), limit=1))
        self._learn_beside(wx, map_name, found)
        return found

    def _run_query(self, wx: str, prefix: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {
            "TableName": self.tables.activity_table, "ConsistentRead": True,
            "KeyConditionExpression": "workflow_exec_id = :w",
            "ExpressionAttributeValues": {":w": {"S": wx}}}
        if prefix:
            params["KeyConditionExpression"] += " AND begins_with(activity_exec_id, :p)"
            params["ExpressionAttributeValues"][":p"] = {"S": f"{wx}:{prefix}"}
        return params

    def _part_query(self, wx: str, map_name: str, k: int,
                    prefix: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {
            "TableName": self.tables.item_table, "ConsistentRead": True,
            "KeyConditionExpression": "item_partition = :k",
            "ExpressionAttributeValues": {":k": {"S": spec_core.map_item_key(wx, map_name, k)}}}
        if prefix:
            params["KeyConditionExpression"] += " AND begins_with(activity_exec_id, :p)"
            params["ExpressionAttributeValues"][":p"] = {"S": f"{wx}:{prefix}"}
        return params

    # -- creating and reading ------------------------------------------------------------

    def create_activity(self, record: ActivityRecord) -> bool:
        if record.timer_epoch is not None:
            record = replace(record, **index_changes({"timer_epoch": record.timer_epoch},
                                                     record.activity_exec_id))
        item = record_item(record)
        place = self._places(record.activity_exec_id)[0]
        if place.logical == "map_item":
            base = split_item(record.activity_name)[0]
            if record.step is not None:  # a code step (<name>#<k>) lives in its run's
                self._learn_beside(record.workflow_exec_id, base, True)  # partition
                place = self._places(record.activity_exec_id)[0]
            elif self._items_beside_run(record.workflow_exec_id, base):
                place = self._places(record.activity_exec_id)[0]  # now known: the run's
            else:
                item["item_partition"] = place.key["item_partition"]
        # Ids are deterministic (workflow, activity, attempt): a replayed start or retry
        # finds the row and must not reset its state.
        return self.tables.put_new(place.table, place.logical, item, "activity_exec_id")

    def create_claimable(self, record: ActivityRecord,
                         claim: tuple[object, ...] | None = None) -> bool:
        """Create an attempt that is READY to be claimed (claim keys derived here;
        ``claim``: where it is served and its priority, ``flow.claim_intent``)."""
        intent = (record.workflow_name, record.activity_name, *(claim or ()))
        keys = self.indexed({"claimable": intent}, record.activity_exec_id)
        return self.create_activity(replace(record, **keys))

    def get_activity(self, activity_exec_id: str) -> ActivityRecord | None:
        for place in self._places(activity_exec_id):
            item = self.tables.get(place.table, place.key)
            if item:
                return activity_record(item)
        return None

    def list_activities(self, workflow_exec_id: str, prefix: str | None = None, *,
                        map_size: int | None = None, items: bool = True
                        ) -> list[ActivityRecord]:
        """Every attempt of every activity of one execution, map items included, in id
        order: one consistent Query of the run's partition, and one of each partition of
        each map that has items (in parallel). With ``prefix``, only those whose activity
        name starts so (``"load:"``: the attempts of ``load``; ``"m#"``: the items of map
        ``m``, ``map_size`` saying how many it has when known; ``"m#3:"``: item 3's; a
        code map's: ``"s#2#"``, ``"s#2#3:"``). ``items=False``: the run's partition only
        (a code run's steps, without the items of its maps)."""
        wx = workflow_exec_id
        if prefix and ITEM_MARK in prefix:  # a map's items, or one item's attempts
            if prefix.endswith(":"):
                base, number = split_item(prefix[:-1])
                parts: Sequence[int] = [number % spec_core.MAP_ITEM_PARTITIONS] \
                    if number is not None else range(spec_core.MAP_ITEM_PARTITIONS)
            else:
                base = prefix[:-1] if prefix.endswith(ITEM_MARK) \
                    else prefix.rpartition(ITEM_MARK)[0]
                parts = range(min(spec_core.MAP_ITEM_PARTITIONS, spec_core.MAP_ITEM_PARTITIONS
                                  if map_size is None else max(map_size, 0)))
            reads: list[dict[str, Any]] = [self._part_query(wx, base, k, prefix)
                                           for k in parts]
            if self._known_beside(wx, base) is not False:
                reads.append(self._run_query(wx, prefix))
            return self._records(reads)
        rows = self._records([self._run_query(wx, prefix)])
        if prefix or not items:
            return rows
        sizes: dict[str, int] = {}
        beside: set[str] = set()
        for row in rows:
            name, number = split_item(row.activity_name)
            if number is not None:
                beside.add(name)  # a legacy item (or a code step: kept beside too)
            if row.map_size and (number is None or row.step is not None):
                # a DAG map's row, or a code map's step: its items are in map_item
                sizes[row.activity_name] = max(sizes.get(row.activity_name, 0),
                                               row.map_size)
        reads = [self._part_query(wx, name, k) for name, size in sizes.items()
                 if self._known_beside(wx, name) is not True
                 for k in range(min(spec_core.MAP_ITEM_PARTITIONS, size))]
        found = self._records(reads)
        for name in beside:
            self._learn_beside(wx, name, True)
        for name in {split_item(a.activity_name)[0] for a in found}:
            self._learn_beside(wx, name, False)
        return sorted(rows + found, key=lambda a: a.activity_exec_id) if found else rows

    def _records(self, reads: Sequence[dict[str, Any]]) -> list[ActivityRecord]:
        parts = fan_out(lambda params: [activity_record(i) for i in self.tables.query(params)],
                        reads)
        out = [a for part in parts for a in part]
        return sorted(out, key=lambda a: a.activity_exec_id) if len(parts) > 1 else out

    # -- moving ----------------------------------------------------------------------------

    def update_attempt(self, activity_exec_id: str, expr: Expression, update: str,
                       condition: str) -> Item:
        """The conditional update at the attempt's place; an item id missing from
        ``map_item`` is tried in its run's partition (a map from before map_item).

        Raises:
            ConditionLost: with the item as it is now (None: it exists nowhere).
        """
        places = self._places(activity_exec_id)
        for n, place in enumerate(places):
            try:
                return self.tables.update(place.logical, place.table, place.key, expr, update,
                                          condition)
            except ConditionLost as lost:
                if lost.item or n == len(places) - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def activity_conflict(self, lost: ConditionLost, activity_exec_id: str,
                          expected: str | list[str], transition: str | None) -> StateConflict:
        current = activity_record(lost.item) if lost.item else None
        return StateConflict(expected=expected,
                             actual=current.state.value if current and current.state else None,
                             activity_exec_id=activity_exec_id, transition=transition,
                             current=current)

    def try_set_activity(self, activity_exec_id: str, changes: Changes, *,
                         states: Collection[ActivityState]) -> bool:
        """``set_activity`` that reports a refused condition as False."""
        try:
            self.set_activity(activity_exec_id, changes, states=states)
        except StateConflict:
            return False
        return True

    def move_activity(self, activity_exec_id: str, expected: ActivityState,
                      path: Sequence[ActivityState], changes: Changes, *, now: float,
                      actor: str, due_by: float | None = None,
                      claimed: bool = False, written_by: float | None = None,
                      late_at: float | None = None) -> ActivityRecord:
        changes = self.indexed(changes, activity_exec_id)
        expr = Expression()
        final = path[-1]
        update = expr.update({**changes, "state": final.value, "updated_epoch": now},
                             append={"history": [Change(s.value, now, actor) for s in path]})
        # state = :expected is the whole contract: one winner per move (and per path of
        # moves one actor makes in one write; a missing item has no state).
        condition = expr.equals("state", expected.value)
        if due_by is not None:
            # The deadline the sweep saw must still hold: a heartbeat that landed since
            # pushed deadline_epoch forward (it never moves the timers entry) and wins;
            # so does a re-arm that pushed timer_epoch.
            condition += " AND " + expr.at_most("timer_epoch", due_by)
            condition += (f" AND ({expr.missing('deadline_epoch')} OR "
                          f"{expr.at_most('deadline_epoch', due_by)})")
        if written_by is not None:
            # A result counts only if written before the attempt's deadline (as it is
            # now: a heartbeat pushed it): a later one is the listener's time-out.
            condition += (f" AND ({expr.missing('deadline_epoch')} OR "
                          f"{expr.more_than('deadline_epoch', written_by)})")
        if late_at is not None:
            # That time-out, only while the deadline still came before the result.
            condition += " AND " + expr.at_most("deadline_epoch", late_at)
        if claimed:
            # A claim takes only what is still in the claimable index: a suspend took
            # it out (and an index read may lag behind).
            condition += " AND " + expr.exists("claim_key")
        try:
            return activity_record(self.update_attempt(activity_exec_id, expr, update,
                                                       condition))
        except ConditionLost as lost:
            raise self.activity_conflict(lost, activity_exec_id, expected.value,
                                         final.value) from None

    def set_activity(self, activity_exec_id: str, changes: Changes, *,
                     states: Collection[ActivityState],
                     alive_at: float | None = None) -> ActivityRecord:
        expr = Expression()
        update = expr.update(self.indexed(changes, activity_exec_id))
        # Attributes other than the state, only while the state is one of ``states``
        # (e.g. a heartbeat only while the activity runs; never on a TIMED_OUT one).
        condition = expr.one_of("state", sorted(s.value for s in states))
        if alive_at is not None:
            # A heartbeat written at alive_at, only before its deadline (engine/written.py).
            condition += (f" AND ({expr.missing('deadline_epoch')} OR "
                          f"{expr.more_than('deadline_epoch', alive_at)})")
        try:
            return activity_record(self.update_attempt(activity_exec_id, expr, update,
                                                       condition))
        except ConditionLost as lost:
            raise self.activity_conflict(lost, activity_exec_id,
                                         sorted(s.value for s in states), None) from None

    # -- the sparse indexes (both tables carry them) ---------------------------------------

    def due_timers(self, now: float, limit: int, shard: str | None = None) -> list[Due]:
        """Armed deadlines at or before ``now``, oldest first in each table: at most
        ``limit`` per table of shard ``shard`` (a Query of ``activity_exec`` and one of
        ``map_item``), or of every shard (read at once) when None. The cost grows with
        what is due, not with what runs (the indexes are sparse)."""
        def one(at: tuple[str, str]) -> list[Due]:
            # (map_item's entries hold the attempt's id; the run's is in it)
            return [Due(parse_activity_exec_id(hit["activity_exec_id"]["S"]).workflow_exec_id,
                        hit["activity_exec_id"]["S"])
                    for hit in self.tables.query({
                        "TableName": at[0], "IndexName": "timers",
                        "KeyConditionExpression": "timer_shard = :s AND timer_epoch <= :n",
                        "ExpressionAttributeValues": {":s": {"S": at[1]}, ":n": to_ddb(now)},
                    }, limit=limit)]
        shards = self.timer_shards if shard is None else (shard,)
        return [d for part in fan_out(one, [(t, k) for k in shards
                                            for t in self._indexed_tables(k)])
                for d in part]

    def due_timer_shards(self, now: float) -> set[str] | None:
        """The ``timers`` shards (of either table) with a deadline due at ``now``, one
        request per table (``due_keys``); None: ask them shard by shard."""
        found: set[str] = set()
        for table, shards in ((self.tables.activity_table, self.timer_shards),
                              (self.tables.item_table,
                               self.timer_shards[:spec_core.MAP_ITEM_INDEX_SHARDS])):
            got = self.tables.due_keys(table, "timers", "timer_shard", "timer_epoch", shards, now)
            if got is None:
                return None
            found |= got
        return found

    def _indexed_tables(self, shard: str) -> tuple[str, ...]:
        """The tables whose ``timers``/``claimable`` index has shard ``shard``: both for a
        priority shard or one of ``map_item``'s fewer shards, else ``activity_exec``."""
        shard = shard.removeprefix(WORKER_SHARD_PREFIX)  # a worker's shard: as its twin's
        if not shard.isdigit() or int(shard) < spec_core.MAP_ITEM_INDEX_SHARDS:
            return self.tables.activity_table, self.tables.item_table
        return (self.tables.activity_table,)

    def claimable(self, shard: str, key_prefix: str, limit: int) -> list[ActivityRecord]:
        """READY external attempts of one shard (of both tables), as partial records
        (what the index projects). Eventually consistent: a hit may already be taken."""
        return self.claimable_among((shard,), key_prefix, limit)

    def claimable_among(self, shards: Sequence[str], key_prefix: str,
                        limit: int) -> list[ActivityRecord]:
        """READY external attempts of ``shards`` (of both tables), as partial records: one
        request per table (``select_in``; about ``limit`` per shard, at most a page), or,
        where PartiQL is refused, a Query of each shard (at most ``limit`` each)."""
        cond = "claim_shard = :s"
        values: dict[str, Any] = {}
        if key_prefix:
            cond += " AND begins_with(claim_key, :p)"
            values[":p"] = {"S": key_prefix}

        def one(at: tuple[str, str]) -> list[Item]:
            return list(self.tables.query({
                "TableName": at[0], "IndexName": "claimable", "KeyConditionExpression": cond,
                "ExpressionAttributeValues": {**values, ":s": {"S": at[1]}}}, limit=limit))

        def read(table: str) -> list[Item]:
            keys = [k for k in shards if table in self._indexed_tables(k)]
            if len(keys) > 1:
                got = self.tables.select_in(
                    table, "claimable", "claim_shard", keys,
                    where=' AND begins_with("claim_key", ?)' if key_prefix else "",
                    values=[{"S": key_prefix}] if key_prefix else [],
                    limit=min(DUE_KEYS_LIMIT, limit * len(keys)))
                if got is not None:
                    return got[0]
            return [i for part in fan_out(one, [(table, k) for k in keys]) for i in part]
        return [activity_record(i) for part in fan_out(read, (self.tables.activity_table,
                                                              self.tables.item_table))
                for i in part]
