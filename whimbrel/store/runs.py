"""The runs part (core): workflow executions, their kept-apart inputs and attributes,
and fan-in edges. Its methods are ``Store``'s own (the engine's core ``StorePort``); the
attempts are the other core part (:mod:`whimbrel.store.attempts`).

Every write states its condition and why. Conditional writes ask for the item as it is
when they lose (``ReturnValuesOnConditionCheckFailure``), so a lost race costs no read:
the loser gets :class:`~whimbrel.contract.errors.StateConflict` with ``current`` set.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from whimbrel.contract.errors import StateConflict
from whimbrel.contract.ids import shard_of
from whimbrel.contract.records import REMOVE, Change, Changes, WorkflowRecord
from whimbrel.contract.states import WorkflowState
from whimbrel.store import spec_core
from whimbrel.store.codec import (
    Expression,
    payload_text,
    record_item,
    to_ddb,
    workflow_record,
)
from whimbrel.store.errors import ConditionLost
from whimbrel.store.keys import day_key, fan_out, index_changes, name_state_key, state_key
from whimbrel.store.plumbing import CAPACITY, Tables

__all__ = ["Runs", "WorkflowKeyPage", "index_changes", "name_state_key"]

_CAPACITY = CAPACITY
#: The ``part`` of a run's input in ``workflow_exec_data``.
INPUT_PART = "input"


@dataclass(frozen=True)
class WorkflowKeyPage:
    """Entries of one listing-index Query: ``(created_epoch, workflow_exec_id)`` newest
    first, and the key to continue from (None when the partition has no more)."""

    keys: list[tuple[float, str]]
    last_key: dict[str, Any] | None


class Runs:
    """Executions and fan-in edges of one table prefix: a core part, whose methods are
    ``Store``'s own (the engine's core ``StorePort``). Thread-safe."""

    #: Shards of the sparse ``reconcile`` index (``timer_shards``: ``Attempts``).
    check_shards: tuple[str, ...] = tuple(str(i) for i in range(spec_core.RECONCILE_SHARDS))

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    # -- workflow executions ---------------------------------------------------------------

    def create_workflow(self, record: WorkflowRecord) -> bool:
        if record.check_epoch is not None and record.check_shard is None:
            record = replace(record, check_shard=shard_of(record.workflow_exec_id,
                                                          spec_core.RECONCILE_SHARDS))
        item = record_item(record)
        item["name_state"] = {"S": name_state_key(record.workflow_name, record.state.value,
                                                  record.workflow_exec_id)}
        item["state_key"] = {"S": state_key(record.state.value, record.workflow_exec_id)}
        if record.created_day:
            item["created_day"] = {"S": day_key(record.workflow_exec_id)}
        if record.input is not None and len(record.input.encode()) > spec_core.INLINE_INPUT_BYTES:
            # A large input is kept apart, written first: whoever reads the run's item
            # (which says input_apart) finds it. attribute_not_exists: a replayed start
            # writes nothing, and a request id re-used for another run cannot replace the
            # input of the run it started.
            self.tables.put_new(self.tables.data_table, "workflow_exec_data", {
                "workflow_exec_id": {"S": record.workflow_exec_id},
                "part": {"S": INPUT_PART}, "input": {"S": record.input}}, "part")
            del item["input"]
            item["input_apart"] = {"BOOL": True}
        # The id is derived from the request id: only the first start creates it.
        return self.tables.put_new(self.tables.workflow_table, "workflow_exec", item,
                                   "workflow_exec_id")

    def get_workflow(self, workflow_exec_id: str) -> WorkflowRecord | None:
        item = self.tables.get(self.tables.workflow_table,
                               {"workflow_exec_id": {"S": workflow_exec_id}})
        return workflow_record(item) if item else None

    def workflow_input(self, workflow_exec_id: str) -> str | None:
        """The input of a run whose item says ``input_apart`` (one consistent GetItem;
        it never changes, so a caller may keep it)."""
        item = self.tables.get(self.tables.data_table, {"workflow_exec_id": {"S": workflow_exec_id},
                                                        "part": {"S": INPUT_PART}})
        return payload_text(item["input"]) if item and "input" in item else None

    def expire_workflow_data(self, workflow_exec_id: str, expires: float | None) -> None:
        """Give a run's kept-apart input the expiry of its run (None: none)."""
        expr = Expression()
        params = expr.params(
            TableName=self.tables.data_table, **CAPACITY,
            Key={"workflow_exec_id": {"S": workflow_exec_id}, "part": {"S": INPUT_PART}},
            UpdateExpression=expr.update({"expires_epoch": REMOVE if expires is None
                                          else expires}),
            # Only an item that exists: never create a stub of a run's data.
            ConditionExpression=expr.exists("part"))
        try:
            self.tables.write_call("UpdateItem", "workflow_exec_data", params)
        except ConditionLost:
            pass

    def move_workflow(self, workflow_exec_id: str, expected: Collection[WorkflowState],
                      new_state: WorkflowState, changes: Changes, *, now: float,
                      actor: str, workflow_name: str,
                      if_unchanged: Mapping[str, int] | None = None) -> WorkflowRecord:
        changes = index_changes(changes, workflow_exec_id=workflow_exec_id)
        expr = Expression()
        # The listing index's key moves in the same write as the state (never a second).
        update = expr.update({**changes, "state": new_state.value, "updated_epoch": now,
                              "name_state": name_state_key(workflow_name, new_state.value,
                                                           workflow_exec_id),
                              "state_key": state_key(new_state.value, workflow_exec_id)},
                             append={"history": [Change(new_state.value, now, actor)]})
        # state IN expected: the contract's single-writer rule for a state change (and
        # the item exists: a missing state is not in any list).
        condition = expr.one_of("state", sorted(s.value for s in expected))
        for attr, seen in (if_unchanged or {}).items():
            # A counter the mover read (e.g. redrive_count) is still what it saw: of two
            # movers that read the same item, one wins even if the state came back.
            same = expr.equals(attr, seen)
            condition += f" AND ({expr.missing(attr)} OR {same})" if seen == 0 \
                else f" AND {same}"
        try:
            attributes = self.tables.update("workflow_exec", self.tables.workflow_table,
                                            {"workflow_exec_id": {"S": workflow_exec_id}}, expr,
                                            update, condition)
        except ConditionLost as lost:
            current = workflow_record(lost.item) if lost.item else None
            raise StateConflict(expected=sorted(s.value for s in expected),
                                actual=current.state.value if current else None,
                                workflow_exec_id=workflow_exec_id, transition=new_state.value,
                                current=current) from None
        return workflow_record(attributes)

    def set_workflow(self, workflow_exec_id: str, changes: Changes, *,
                     states: Collection[WorkflowState]) -> bool:
        expr = Expression()
        update = expr.update(index_changes(changes, workflow_exec_id=workflow_exec_id))
        # Only in one of ``states`` (e.g. a finished run must leave the reconcile index,
        # so re-arming it is refused once it ended); never creates the item.
        condition = expr.one_of("state", sorted(s.value for s in states))
        try:
            self.tables.update("workflow_exec", self.tables.workflow_table,
                               {"workflow_exec_id": {"S": workflow_exec_id}}, expr, update,
                               condition)
        except ConditionLost:
            return False
        return True

    def claim_run_end(self, workflow_exec_id: str, activity_exec_id: str, *,
                      states: Collection[WorkflowState],
                      replacing: str | None = None) -> bool:
        """Record ``activity_exec_id`` as the one attempt ending the run early
        (``ending_by``); False when the run is in none of ``states`` or another holds it."""
        expr = Expression()
        update = expr.update({"ending_by": activity_exec_id})
        # Only while the run may still be ended early; one ender per run: none yet, this
        # one (a retry of its own claim), or the stale holder the caller saw.
        holders = [activity_exec_id] + ([replacing] if replacing else [])
        condition = (f"{expr.one_of('state', sorted(s.value for s in states))} AND "
                     f"({expr.missing('ending_by')} OR {expr.one_of('ending_by', holders)})")
        try:
            self.tables.update("workflow_exec", self.tables.workflow_table,
                               {"workflow_exec_id": {"S": workflow_exec_id}}, expr, update,
                               condition)
        except ConditionLost:
            return False
        return True

    def due_check_shards(self, now: float) -> set[str] | None:
        """The ``reconcile`` shards with a check due at ``now``, in one request
        (``due_keys``); None: ask them shard by shard."""
        return self.tables.due_keys(self.tables.workflow_table, "reconcile", "check_shard",
                                    "check_epoch", self.check_shards, now)

    def due_workflow_checks(self, now: float, limit: int,
                            shard: str | None = None) -> list[str]:
        """Runs whose check time is at or before ``now``, oldest first: at most ``limit``
        of shard ``shard`` (one Query), or of every shard (read at once) when None."""
        def one(k: str) -> list[str]:
            return [hit["workflow_exec_id"]["S"] for hit in self.tables.query({
                "TableName": self.tables.workflow_table, "IndexName": "reconcile",
                "KeyConditionExpression": "check_shard = :s AND check_epoch <= :n",
                "ExpressionAttributeValues": {":s": {"S": k}, ":n": to_ddb(now)},
            }, limit=limit)]
        if shard is not None:
            return one(shard)
        return [wx for hits in fan_out(one, self.check_shards) for wx in hits]

    def batch_get_workflows(self, ids: Sequence[str]) -> list[WorkflowRecord]:
        found: dict[str, WorkflowRecord] = {}
        wanted = list(dict.fromkeys(ids))
        for start in range(0, len(wanted), 100):
            keys = [{"workflow_exec_id": {"S": i}} for i in wanted[start:start + 100]]
            request: dict[str, Any] = {self.tables.workflow_table: {"Keys": keys,
                                                                    "ConsistentRead": True}}
            while request:
                resp = self.tables.client.call("BatchGetItem", {"RequestItems": request,
                                                                **_CAPACITY})
                for item in resp.get("Responses", {}).get(self.tables.workflow_table, []):
                    rec = workflow_record(item)
                    found[rec.workflow_exec_id] = rec
                request = resp.get("UnprocessedKeys") or {}
        return [found[i] for i in ids if i in found]

    def query_workflow_keys(self, index: str, hash_key: str, *, low: float | None,
                            high: float | None, limit: int,
                            start_key: dict[str, Any] | None = None) -> WorkflowKeyPage:
        """One Query of a listing index of ``workflow_exec`` (``by_name_state``,
        ``by_day``): newest first, ``low <= created_epoch <= high`` (either bound may be
        None), at most ``limit`` entries. Reads only index keys (the listing indexes are
        KEYS_ONLY). Pass ``start_key`` (the previous page's ``last_key``) to go on."""
        spec = spec_core.WORKFLOW_ATTRIBUTE if index == "by_attribute" else spec_core.WORKFLOW_EXEC
        key_attr = spec.index(index).hash_key.name
        cond = f"{key_attr} = :k"
        values: dict[str, Any] = {":k": {"S": hash_key}}
        if low is not None and high is not None:
            cond += " AND created_epoch BETWEEN :a AND :b"
            values.update({":a": to_ddb(low), ":b": to_ddb(high)})
        elif low is not None:
            cond += " AND created_epoch >= :a"
            values[":a"] = to_ddb(low)
        elif high is not None:
            cond += " AND created_epoch <= :b"
            values[":b"] = to_ddb(high)
        params: dict[str, Any] = {
            "TableName": self.tables.attribute_table if spec is spec_core.WORKFLOW_ATTRIBUTE
            else self.tables.workflow_table, "IndexName": index, "Limit": limit,
            "KeyConditionExpression": cond, "ExpressionAttributeValues": values,
            "ScanIndexForward": False, **_CAPACITY}
        if start_key:
            params["ExclusiveStartKey"] = start_key
        resp = self.tables.client.call("Query", params)
        keys = [(float(h["created_epoch"]["N"]), h["workflow_exec_id"]["S"])
                for h in resp.get("Items", [])]
        return WorkflowKeyPage(keys, resp.get("LastEvaluatedKey"))

    def put_attributes(self, record: WorkflowRecord, values: Mapping[str, str],
                       expires_epoch: float | None) -> None:
        """One ``workflow_attribute`` item per attribute of a run about to be created
        (``values``: each spelled as its index key spells it). Unconditional puts of
        what only this run's id can name: a replayed start writes the same items."""
        wx = record.workflow_exec_id
        shard = shard_of(wx, spec_core.ATTRIBUTE_SHARDS)
        items = [{"PutRequest": {"Item": {
            "workflow_exec_id": {"S": wx}, "attribute": {"S": name},
            "attr_key": {"S": spec_core.attribute_key(name, text, shard)},
            "created_epoch": to_ddb(record.created_epoch),
            "workflow_name": {"S": record.workflow_name},
            **({"expires_epoch": to_ddb(expires_epoch)} if expires_epoch else {})}}}
            for name, text in values.items()]

        def put() -> None:
            request = {self.tables.attribute_table: items}
            while request:
                resp = self.tables.client.call("BatchWriteItem", {"RequestItems": request,
                                                                  **_CAPACITY})
                request = resp.get("UnprocessedItems") or {}
        if items:
            self.tables.write("BatchWriteItem", "workflow_attribute", put)

    # -- fan-in edges ------------------------------------------------------------------------

    @staticmethod
    def dependency_key(workflow_exec_id: str, downstream: str) -> str:
        return f"{workflow_exec_id}/{downstream}"

    def put_dependencies(self, workflow_exec_id: str, downstream: str,
                         upstreams: Iterable[str]) -> None:
        key = self.dependency_key(workflow_exec_id, downstream)
        items = [{"PutRequest": {"Item": {"dependency_key": {"S": key},
                                          "upstream": {"S": up}}}} for up in upstreams]

        # Unconditional batch put: edges are only created while the workflow is still
        # REQUESTED, before any upstream can complete (docs/architecture.md).
        def put() -> None:
            for start in range(0, len(items), 25):
                request = {self.tables.edge_table: items[start:start + 25]}
                while request:
                    resp = self.tables.client.call("BatchWriteItem", {"RequestItems": request,
                                                                      **_CAPACITY})
                    request = resp.get("UnprocessedItems") or {}
        self.tables.write("BatchWriteItem", "activity_exec_dependency", put)

    def delete_dependency(self, workflow_exec_id: str, downstream: str, upstream: str) -> None:
        params = {"TableName": self.tables.edge_table, **_CAPACITY,
                  "Key": {"dependency_key": {"S": self.dependency_key(workflow_exec_id,
                                                                      downstream)},
                          "upstream": {"S": upstream}}}
        self.tables.write_call("DeleteItem", "activity_exec_dependency", params)

    def pending_dependencies(self, workflow_exec_id: str, downstream: str,
                             limit: int | None = 1) -> list[str]:
        """Upstreams of ``downstream`` still not completed (consistent; Limit 1 is O(1))."""
        return [i["upstream"]["S"] for i in self.tables.query({
            "TableName": self.tables.edge_table, "ConsistentRead": True,
            "KeyConditionExpression": "dependency_key = :k",
            "ExpressionAttributeValues": {":k": {"S": self.dependency_key(workflow_exec_id,
                                                                          downstream)}}},
            limit=limit)]
