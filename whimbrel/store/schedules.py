"""The ``schedule`` table: one item per schedule, and its sparse ``due_schedules`` index.

The index key is ``fire_shard`` (a stable hash of the schedule id over
:data:`~whimbrel.store.specs.SCHEDULE_SHARDS` partitions), sorted by ``next_fire_epoch``:
both are written only while the schedule is ACTIVE, so a paused, ended or deleted
schedule is not in the index at all, and "what is due" (one request for every shard,
then a Query of each busy one) costs what is due (docs/architecture.md, "Schedules").
The engine never spells a shard: a change set carrying ``next_fire_epoch`` (a time or
``REMOVE``) gets its shard here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from whimbrel.contract.ids import shard_of
from whimbrel.contract.records import REMOVE, Changes
from whimbrel.contract.schedules import Schedule, ScheduleInfo
from whimbrel.store import specs
from whimbrel.store.codec import Expression, Item, decode_fields, to_ddb
from whimbrel.store.errors import ConditionLost
from whimbrel.store.runs import _CAPACITY, RunTables

_INFO_FIELDS = ("status", "last_fire_epoch", "next_fire_epoch", "last_run",
                "buffered_fire_epoch", "skipped", "last_error", "created_epoch")


def schedule_info(item: Mapping[str, Any]) -> ScheduleInfo:
    """A ``schedule`` item as a record (the spec is read without re-validating it: it
    was valid when created, and a zone database change must not hide it)."""
    spec = specs.SCHEDULE
    data = decode_fields(spec, item, ("spec", *_INFO_FIELDS))
    body = json.loads(data.pop("spec"))
    return ScheduleInfo(schedule=Schedule(**body), **data)


class ScheduleTables(RunTables):
    """Schedules of one table prefix."""

    table_prefix: str
    #: Partitions of the ``due_schedules`` index; a sweep asks each of them.
    schedule_shards: tuple[str, ...] = tuple(str(i) for i in range(specs.SCHEDULE_SHARDS))

    @property
    def _schedule_table(self) -> str:
        return specs.SCHEDULE.table_name(self.table_prefix)

    @staticmethod
    def _schedule_key(schedule_id: str) -> Item:
        return {"schedule_id": {"S": schedule_id}}

    def put_schedule(self, info: ScheduleInfo, now: float) -> bool:
        """Create a schedule; False when its id exists already."""
        item: Item = {
            "schedule_id": {"S": info.schedule_id},
            "workflow_name": {"S": info.schedule.workflow_name},
            "spec": {"S": json.dumps(info.schedule.to_dict(), sort_keys=True)},
            "created_epoch": to_ddb(info.created_epoch),
            "updated_epoch": to_ddb(now),
            "skipped": to_ddb(info.skipped),
        }
        for name in ("status", "last_fire_epoch", "next_fire_epoch", "last_run",
                     "buffered_fire_epoch"):
            if getattr(info, name) is not None:
                item[name] = to_ddb(getattr(info, name))
        if info.next_fire_epoch is not None:
            item["fire_shard"] = {"S": shard_of(info.schedule_id, specs.SCHEDULE_SHARDS)}
        # A schedule id names one schedule: a second create must not overwrite it.
        return self._put_new(self._schedule_table, "schedule", item, "schedule_id")

    def get_schedule(self, schedule_id: str) -> ScheduleInfo | None:
        item = self._get(self._schedule_table, self._schedule_key(schedule_id))
        return schedule_info(item) if item else None

    def list_schedules(self) -> Iterator[ScheduleInfo]:
        """Every schedule (an operator listing: a Scan of this small table, never on the
        sweep's path)."""
        params: dict[str, Any] = {"TableName": self._schedule_table, **_CAPACITY}
        while True:
            resp = self.client.call("Scan", params)
            for item in resp.get("Items", []):
                yield schedule_info(item)
            start = resp.get("LastEvaluatedKey")
            if not start:
                return
            params["ExclusiveStartKey"] = start

    def due_schedule_shards(self, now: float) -> set[str] | None:
        """The ``due_schedules`` shards with a schedule due at ``now``, in one request
        (``due_keys``); None: ask them shard by shard."""
        return self.due_keys(self._schedule_table, "due_schedules", "fire_shard",
                             "next_fire_epoch", self.schedule_shards, now)

    def due_schedules(self, shard: str, now: float, limit: int) -> list[str]:
        """Ids of the ACTIVE schedules of one shard whose next look is at or before
        ``now``, the oldest first (one Query of the sparse index)."""
        return [hit["schedule_id"]["S"] for hit in self._query({
            "TableName": self._schedule_table, "IndexName": "due_schedules",
            "KeyConditionExpression": "fire_shard = :s AND next_fire_epoch <= :n",
            "ExpressionAttributeValues": {":s": {"S": shard}, ":n": to_ddb(now)}},
            limit=limit)]

    def update_schedule(self, schedule_id: str, changes: Changes, *,
                        expect: Mapping[str, Any]) -> ScheduleInfo | None:
        """Apply ``changes`` if every attribute in ``expect`` still holds its value (None:
        the attribute is absent); the new record, or None when the condition failed (or
        the schedule is gone)."""
        out = dict(changes)
        if "next_fire_epoch" in out:  # the sparse index follows the next look
            out["fire_shard"] = (REMOVE if out["next_fire_epoch"] is REMOVE
                                 else shard_of(schedule_id, specs.SCHEDULE_SHARDS))
        expr = Expression()
        # The item must exist (a deleted schedule is not revived), and each expected
        # attribute must be as the caller read it: the write that advances a schedule
        # from one fire wins once, however many sweepers read it at that fire.
        clauses = [expr.exists("schedule_id")]
        for name, value in expect.items():
            clauses.append(expr.missing(name) if value is None else expr.equals(name, value))
        params = expr.params(TableName=self._schedule_table,
                             Key=self._schedule_key(schedule_id),
                             UpdateExpression=expr.update(out),
                             ConditionExpression=" AND ".join(clauses),
                             ReturnValues="ALL_NEW", **_CAPACITY)
        try:
            resp = self._write("UpdateItem", "schedule",
                               lambda: self.client.call("UpdateItem", params))
        except ConditionLost:
            return None
        return schedule_info(resp["Attributes"])

    def delete_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule; False when there was none."""
        expr = Expression()
        # Only an existing item, so the caller learns whether there was one.
        params = expr.params(TableName=self._schedule_table,
                             Key=self._schedule_key(schedule_id),
                             ConditionExpression=expr.exists("schedule_id"), **_CAPACITY)
        try:
            self._write("DeleteItem", "schedule",
                        lambda: self.client.call("DeleteItem", params))
        except ConditionLost:
            return False
        return True
