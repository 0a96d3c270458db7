"""The cold tables: definitions, Simple API rows (requests, events) and rejections.

The store's ``cold`` part (``store.cold``, holding its ``Tables``); the engine sees it
as ``ColdPort`` (``whimbrel/engine/cold_port.py``).

On the same transport and codec as the hot tables (:mod:`whimbrel.store.runs`): one
request per call, no model layer. A row a raw client wrote may hold native DynamoDB
values where the docs allow them (a payload as a map); the codec reads any of them back,
and the bookkeeping writes on a row (``mark_*``, ``expire_request``) return nothing, so
they never decode the row at all.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from whimbrel.contract.errors import StoreError
from whimbrel.contract.marks import fit
from whimbrel.contract.records import (
    Changes,
    DefinitionRecord,
    EventRecord,
    RejectionRecord,
    RequestRecord,
)
from whimbrel.store import spec_core
from whimbrel.store.codec import Expression, Item, decode_fields, encode_fields
from whimbrel.store.errors import ConditionLost
from whimbrel.store.keys import fan_out, latest_key, rejection_key
from whimbrel.store.plumbing import CAPACITY, Tables

_REQUEST_FIELDS = tuple(RequestRecord.__dataclass_fields__)
_REJECTION_FIELDS = tuple(RejectionRecord.__dataclass_fields__)
_DEFINITION_FIELDS = tuple(DefinitionRecord.__dataclass_fields__)


class Cold:
    """Definitions, requests, events and rejections of one table prefix. A part of
    ``Store`` (``store.cold``)."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables


    def _table(self, spec: spec_core.TableSpec) -> str:
        return spec.table_name(self.tables.prefix)

    def _put_row(self, spec: spec_core.TableSpec, item: Item, key_attr: str) -> bool:
        return self.tables.put_new(self._table(spec), spec.logical_name, item, key_attr)

    def _mark_row(self, spec: spec_core.TableSpec, key: Item, changes: Changes,
                  also: str | None = None, expr: Expression | None = None) -> None:
        expr = expr or Expression()
        # Only an existing row: a record replayed after the row expired is not revived.
        condition = expr.exists(spec.hash_key.name)
        if also:
            condition += f" AND ({also})"
        params = expr.params(TableName=self._table(spec), Key=key,
                             UpdateExpression=expr.update(changes),
                             ConditionExpression=condition, **CAPACITY)
        try:
            self.tables.write_call("UpdateItem", spec.logical_name, params)
        except ConditionLost:
            pass

    # -- definitions -----------------------------------------------------------------

    def _definitions(self, params: dict[str, Any],
                     limit: int | None = None) -> Iterator[DefinitionRecord]:
        spec = spec_core.WORKFLOW_DEFINITION
        for item in self.tables.query({"TableName": self._table(spec), **params}, limit=limit):
            yield DefinitionRecord(**decode_fields(spec, item, _DEFINITION_FIELDS))

    def latest_definition(self, name: str) -> DefinitionRecord | None:
        for record in self._definitions({
                "KeyConditionExpression": "workflow_name = :n", "ConsistentRead": True,
                "ExpressionAttributeValues": {":n": {"S": name}},
                "ScanIndexForward": False}, limit=1):
            return record
        return None

    def get_definition(self, name: str, version: int) -> DefinitionRecord | None:
        spec = spec_core.WORKFLOW_DEFINITION
        item = self.tables.get(self._table(spec), {"workflow_name": {"S": name},
                                                   "version": {"N": str(int(version))}})
        return DefinitionRecord(**decode_fields(spec, item, _DEFINITION_FIELDS)) \
            if item else None

    def latest_version(self, name: str) -> int | None:
        """The latest version of ``name`` as one of its pointer copies (chosen at random)
        says, or None when that copy does not exist yet (a table from before the copies,
        or a name never registered). The version it names may not exist: a register
        points the copies first and writes the version after (see :meth:`point_latest`).
        """
        spec = spec_core.WORKFLOW_DEFINITION
        item = self.tables.get(self._table(spec), {
            "workflow_name": {"S": latest_key(name, random.randrange(spec_core.LATEST_COPIES))},
            "version": {"N": "0"}})
        return int(item["latest"]["N"]) if item and "latest" in item else None

    def point_latest(self, name: str, version: int) -> None:
        """Raise ``name``'s pointer copies to ``version`` (never lower one: a copy already
        at a higher version keeps it). A register calls it *before* it writes the version,
        so a start that reads the new number before the version exists falls back to the
        name's partition and starts the previous one: never a version newer than a
        finished register, never an older one after it returned."""
        spec = spec_core.WORKFLOW_DEFINITION
        for copy in range(spec_core.LATEST_COPIES):
            params: dict[str, Any] = {
                "TableName": self._table(spec),
                "Key": {"workflow_name": {"S": latest_key(name, copy)}, "version": {"N": "0"}},
                "UpdateExpression": "SET latest = :v",
                "ConditionExpression": "attribute_not_exists(latest) OR latest <= :v",
                "ExpressionAttributeValues": {":v": {"N": str(int(version))}}, **CAPACITY}
            try:
                self.tables.write_call("UpdateItem", spec.logical_name, params)
            except ConditionLost:
                pass  # a later register got there first

    def put_definition(self, record: DefinitionRecord) -> bool:
        """Write a new version; False if that version exists already."""
        item = encode_fields(record)
        item["catalog"] = {"S": spec_core.CATALOG}
        # Versions are immutable: never overwrite one (a concurrent register of the same
        # version loses here and retries with the next number).
        return self._put_row(spec_core.WORKFLOW_DEFINITION, item, "version")

    def list_definitions(self) -> Iterator[DefinitionRecord]:
        """All versions of all definitions (an operator listing, not a per-run path)."""
        spec = spec_core.WORKFLOW_DEFINITION
        params: dict[str, Any] = {"TableName": self._table(spec), **CAPACITY}
        while True:
            resp = self.tables.client.call("Scan", params)
            for item in resp.get("Items", []):
                if "catalog" in item:  # not a latest-version pointer
                    yield DefinitionRecord(**decode_fields(spec, item, _DEFINITION_FIELDS))
            start = resp.get("LastEvaluatedKey")
            if not start:
                return
            params["ExclusiveStartKey"] = start

    def definition_versions(self, name: str) -> list[DefinitionRecord]:
        return list(self._definitions({
            "KeyConditionExpression": "workflow_name = :n", "ScanIndexForward": False,
            "ExpressionAttributeValues": {":n": {"S": name}}}))

    def workflow_names(self) -> list[str]:
        """Every registered workflow name (one Query of the catalog index)."""
        spec = spec_core.WORKFLOW_DEFINITION
        return sorted({hit["workflow_name"]["S"] for hit in self.tables.query({
            "TableName": self._table(spec), "IndexName": "all_names",
            "KeyConditionExpression": "#c = :c", "ExpressionAttributeNames": {"#c": "catalog"},
            "ExpressionAttributeValues": {":c": {"S": spec_core.CATALOG}}})})

    # -- requests, events, rejections ----------------------------------------------------

    def put_request(self, record: RequestRecord) -> bool:
        item = encode_fields(record, skip=("outcome", "reason", "processed_epoch"))
        item.setdefault("manual", {"BOOL": False})
        # A request id names one request forever; a retry of the same put is a no-op.
        return self._put_row(spec_core.WORKFLOW_REQUEST, item, "workflow_request_id")

    def get_request(self, request_id: str) -> RequestRecord | None:
        spec = spec_core.WORKFLOW_REQUEST
        item = self.tables.get(self._table(spec), {"workflow_request_id": {"S": request_id}})
        if not item:
            return None
        fields = decode_fields(spec, item, _REQUEST_FIELDS)
        fields.setdefault("workflow_name", "")
        fields.setdefault("when_epoch", 0.0)
        return RequestRecord(**fields)

    def mark_request(self, request_id: str, changes: Changes) -> None:
        """Record what processing did with a client's request row."""
        expr = Expression()
        # Only a client's row (never a Full Logic trace, whose run is its record).
        also = f"{expr.missing('manual')} OR {expr.equals('manual', False)}"
        self._mark_row(spec_core.WORKFLOW_REQUEST, {"workflow_request_id": {"S": request_id}},
                       changes, also, expr)

    def expire_request(self, request_id: str, expires_epoch: float) -> None:
        """Give a request row its expiry (its run ended). A row too close to DynamoDB's
        400 KB limit to take even that gives up its largest attributes, named in its
        ``reason`` (``contract.marks.fit``; issue 31): else the run could never end."""
        spec = spec_core.WORKFLOW_REQUEST
        key: Item = {"workflow_request_id": {"S": request_id}}
        try:
            self._mark_row(spec, key, {"expires_epoch": expires_epoch})
        except StoreError as exc:
            if exc.aws_code != "ValidationException":
                raise
            row = self.tables.get(self._table(spec), key)
            if row:  # read only on this rare path: the mark itself never reads the row
                self._mark_row(spec, key, fit({"expires_epoch": expires_epoch}, None, row,
                                              "workflow_request_id", no_room=True))

    def put_event(self, record: EventRecord) -> bool:
        item = encode_fields(record, skip=("extra",))
        # Event ids are unique; a retried put must not create a second event.
        return self._put_row(spec_core.ACTIVITY_EVENT, item, "activity_event_id")

    def mark_event(self, event_id: str, changes: Changes) -> None:
        self._mark_row(spec_core.ACTIVITY_EVENT, {"activity_event_id": {"S": event_id}}, changes)

    def put_rejection(self, record: RejectionRecord) -> None:
        spec = spec_core.REJECTION
        item = encode_fields(record)
        # Write-sharded by the id: a storm of bad rows of one day spreads over
        # REJECTION_SHARDS keys instead of one.
        item["rejection_day"] = {"S": rejection_key(record.rejection_day, record.rejection_id)}
        params = {"TableName": self._table(spec), "Item": item, **CAPACITY}
        # Rejections are a log: the id is unique per record, so a replay overwrites the
        # same row with the same content (no condition).
        self.tables.write_call("PutItem", spec.logical_name, params)

    def list_rejections(self, day: str, limit: int | None = None) -> list[RejectionRecord]:
        """Rejections of ``day``, newest (highest id) first: every write shard of the
        day, read at once and merged, and the unsharded key rows written before issue 19
        went to (rejections expire; no migration moves them)."""
        spec = spec_core.REJECTION

        def shard(key: str) -> list[RejectionRecord]:
            return [RejectionRecord(**{**decode_fields(spec, item, _REJECTION_FIELDS),
                                       "rejection_day": day})
                    for item in self.tables.query({
                        "TableName": self._table(spec), "ScanIndexForward": False,
                        "KeyConditionExpression": "rejection_day = :d",
                        "ExpressionAttributeValues": {":d": {"S": key}}}, limit=limit)]
        keys = [day] + [spec_core.day_key(day, k) for k in range(spec_core.REJECTION_SHARDS)]
        out = sorted((r for part in fan_out(shard, keys) for r in part),
                     key=lambda r: r.rejection_id, reverse=True)
        return out if limit is None else out[:limit]

