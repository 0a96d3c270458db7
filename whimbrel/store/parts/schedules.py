"""The ``schedule`` table: one item per schedule, and its sparse ``due_schedules`` index.

The store's part for the ``schedule`` table (``store.part(SchedulePort)``, holding its
``Tables``); the schedules feature sees it as ``SchedulePort``
(``whimbrel/engine/schedule_port.py``).

The index key is ``fire_shard`` (a stable hash of the schedule id over
:data:`~whimbrel.store.spec_core.SCHEDULE_SHARDS` partitions), sorted by ``next_fire_epoch``:
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
from whimbrel.contract.schedule_info import ScheduleInfo, ScheduleStatus
from whimbrel.contract.schedules import Schedule
from whimbrel.contract.stored import cut_problem, read_spec
from whimbrel.store import spec_core
from whimbrel.store.codec import Expression, Item, from_ddb, payload_text, to_ddb
from whimbrel.store.errors import ConditionLost
from whimbrel.store.part import Part
from whimbrel.store.plumbing import CAPACITY
from whimbrel.store.spec_types import IndexSpec, Key, TableSpec, attributes

#: The attributes of a schedule item besides its key and spec, and what each holds.
_INFO_FIELDS: dict[str, type] = {
    "status": str, "last_fire_epoch": float, "next_fire_epoch": float, "last_run": str,
    "buffered_fire_epoch": float, "skipped": int, "last_error": str,
    "created_epoch": float}
_STATUSES = tuple(s.value for s in ScheduleStatus)


def schedule_info(item: Mapping[str, Any]) -> ScheduleInfo:
    """A ``schedule`` item as a record, whatever it holds (issue 31): the spec is read by
    the one tolerant reader (:func:`~whimbrel.contract.stored.read_spec`: unknown fields
    ignored, kept in the item), and an attribute of a wrong type is left out; either
    way the record says why in ``problem``, so a listing shows the item and the sweep
    skips it, and no odd item stops the others. The spec is checked field by field only
    (it was valid when created; an ended one's window may lie in the past)."""
    problems: list[str] = []
    data = {name: value for name, kind in _INFO_FIELDS.items()
            if (value := _attribute(item, name, kind, problems)) is not None}
    if data.get("status", ScheduleStatus.ACTIVE.value) not in _STATUSES:
        problems.append(f"status {data['status']!r} is not one this version knows "
                        f"({', '.join(_STATUSES)})"[:300])
    starting = _attribute(item, "starting", dict, problems)
    if starting is not None:
        data.update(_starting(starting, problems))
    key = item.get("schedule_id", {}).get("S", "")
    name = item.get("workflow_name", {}).get("S", "")
    spec = item.get("spec")
    try:
        text = None if spec is None else payload_text(spec)
    except (ValueError, RecursionError) as exc:
        text = f"<{exc}>"
    stored = read_spec(Schedule, text,
                       key={"schedule_id": key}, fallback={"workflow_name": name},
                       check=Schedule.field_problems)
    if stored.problem is not None:
        problems.insert(0, stored.problem)
    return ScheduleInfo(schedule=stored.value, **data, ignored_fields=stored.ignored,
                        problem=cut_problem("; ".join(problems)) if problems else None)


def _starting(value: Mapping[str, Any], problems: list[str]) -> dict[str, Any]:
    """``starting`` (``{"fires": [epochs], "next": epoch}``, "next" absent: the
    schedule ends) as record fields."""
    fires, nxt = value.get("fires"), value.get("next")
    if isinstance(fires, list) and fires and all(_is_number(f) for f in fires) \
            and (nxt is None or _is_number(nxt)):
        return {"starting": tuple(float(f) for f in fires),
                "next_after_start": None if nxt is None else float(nxt)}
    problems.append(f"starting holds {value!r}, not its firings and next look"[:300])
    return {}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _attribute(item: Mapping[str, Any], name: str, kind: type,
               problems: list[str]) -> Any:
    """One attribute as ``kind`` (float: any number), None when absent; one of another
    type is reported in ``problems`` and read as absent."""
    av = item.get(name)
    if av is None:
        return None
    try:
        value = from_ddb(av)
    except (ValueError, RecursionError) as exc:
        problems.append(f"{name}: {exc}"[:300])
        return None
    if value is None:
        return None
    if not (_is_number(value) if kind is float else
            isinstance(value, kind) and not isinstance(value, bool)):
        problems.append(f"{name} holds {value!r}, not {kind.__name__}"[:300])
        return None
    return float(value) if kind is float else value


SCHEDULE = TableSpec(
    "schedule",
    Key("schedule_id"),
    attributes=attributes("schedule_id workflow_name spec:J status last_fire_epoch:N starting:J "
                          "next_fire_epoch:N fire_shard last_run buffered_fire_epoch:N "
                          "skipped:I last_error created_epoch:N updated_epoch:N expires_epoch:N"),
    indexes=(
        IndexSpec(
            "due_schedules",
            Key("fire_shard"),
            Key("next_fire_epoch", "N"),
            purpose="sparse: present only while a schedule is ACTIVE (paused, ended and "
            "deleted ones drop out); the sweep asks each shard for what is due",
        ),
    ),
    purpose="One item per schedule (Whimbrel.create_schedule): its spec, the last fire "
    "handled and when the sweep next looks at it. A firing starts its run directly "
    "(request id '<schedule_id>@<fire time>'), so no stream.",
)


class Schedules(Part):
    """Schedules of one table prefix: the engine's ``SchedulePort``
    (``store.part(SchedulePort)``)."""

    PORT = "SchedulePort"
    TABLES = (SCHEDULE,)

    #: Partitions of the ``due_schedules`` index; a sweep asks each of them.
    schedule_shards: tuple[str, ...] = tuple(str(i) for i in range(spec_core.SCHEDULE_SHARDS))

    @property
    def _schedule_table(self) -> str:
        return SCHEDULE.table_name(self.tables.prefix)

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
            item["fire_shard"] = {"S": shard_of(info.schedule_id, spec_core.SCHEDULE_SHARDS)}
        # A schedule id names one schedule: a second create must not overwrite it.
        return self.tables.put_new(self._schedule_table, "schedule", item, "schedule_id")

    def get_schedule(self, schedule_id: str) -> ScheduleInfo | None:
        item = self.tables.get(self._schedule_table, self._schedule_key(schedule_id))
        return schedule_info(item) if item else None

    def list_schedules(self) -> Iterator[ScheduleInfo]:
        """Every schedule (an operator listing: a Scan of this small table, never on the
        sweep's path)."""
        params: dict[str, Any] = {"TableName": self._schedule_table, **CAPACITY}
        while True:
            resp = self.tables.client.call("Scan", params)
            for item in resp.get("Items", []):
                yield schedule_info(item)
            start = resp.get("LastEvaluatedKey")
            if not start:
                return
            params["ExclusiveStartKey"] = start

    def due_schedule_shards(self, now: float) -> set[str] | None:
        """The ``due_schedules`` shards with a schedule due at ``now``, in one request
        (``due_keys``); None: ask them shard by shard."""
        return self.tables.due_keys(self._schedule_table, "due_schedules", "fire_shard",
                                    "next_fire_epoch", self.schedule_shards, now)

    def due_schedules(self, shard: str, now: float, limit: int) -> list[str]:
        """Ids of the ACTIVE schedules of one shard whose next look is at or before
        ``now``, the oldest first (one Query of the sparse index)."""
        return [hit["schedule_id"]["S"] for hit in self.tables.query({
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
                                 else shard_of(schedule_id, spec_core.SCHEDULE_SHARDS))
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
                             ReturnValues="ALL_NEW", **CAPACITY)
        try:
            resp = self.tables.write_call("UpdateItem", "schedule", params)
        except ConditionLost:
            return None
        return schedule_info(resp["Attributes"])

    def delete_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule; False when there was none."""
        expr = Expression()
        # Only an existing item, so the caller learns whether there was one.
        params = expr.params(TableName=self._schedule_table,
                             Key=self._schedule_key(schedule_id),
                             ConditionExpression=expr.exists("schedule_id"), **CAPACITY)
        try:
            self.tables.write_call("DeleteItem", "schedule", params)
        except ConditionLost:
            return False
        return True
