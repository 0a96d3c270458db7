"""The hot tables: workflow and activity executions and fan-in edges, on the lean client.

Every write states its condition and why. Conditional writes ask for the item as it is
when they lose (``ReturnValuesOnConditionCheckFailure``), so a lost race costs no read:
the loser gets :class:`~whimbrel.contract.errors.StateConflict` with ``current`` set.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from whimbrel.contract.errors import StateConflict
from whimbrel.contract.ids import parse_activity_exec_id, shard_of
from whimbrel.contract.records import (
    ActivityRecord,
    Change,
    Changes,
    Due,
    WorkflowRecord,
)
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.store import specs
from whimbrel.store.codec import (
    Expression,
    Item,
    activity_record,
    record_item,
    to_ddb,
    workflow_record,
)
from whimbrel.store.errors import ConditionLost
from whimbrel.store.keys import day_key, fan_out, index_changes, name_state_key
from whimbrel.store.lean import RequestObserver, RetryObserver

__all__ = ["Client", "RunTables", "WorkflowKeyPage", "Write", "index_changes",
           "name_state_key"]


@dataclass(frozen=True)
class WorkflowKeyPage:
    """Entries of one listing-index Query: ``(created_epoch, workflow_exec_id)`` newest
    first, and the key to continue from (None when the partition has no more)."""

    keys: list[tuple[float, str]]
    last_key: dict[str, Any] | None


class Client(Protocol):
    """What the tables need of a transport (``whimbrel.store.transport.Transport``)."""

    observers: list[RequestObserver]
    retry_observers: list[RetryObserver]

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]: ...


#: (operation, logical table, thunk) -> result; runs the write-hooks around the thunk.
Write = Callable[[str, str, Callable[[], Any]], Any]

_CAPACITY = {"ReturnConsumedCapacity": "INDEXES"}


class RunTables:
    """Executions and edges of one table prefix. Thread-safe."""

    def __init__(self, client: Client, prefix: str, write: Write) -> None:
        self.client = client
        self._write = write
        self.workflow_table = specs.WORKFLOW_EXEC.table_name(prefix)
        self.activity_table = specs.ACTIVITY_EXEC.table_name(prefix)
        self.edge_table = specs.ACTIVITY_EXEC_DEPENDENCY.table_name(prefix)

    # -- plumbing ------------------------------------------------------------------------

    def _put_new(self, table: str, logical: str, item: Item, key_attr: str) -> bool:
        expr = Expression()
        params = expr.params(TableName=table, Item=item,
                             ConditionExpression=expr.missing(key_attr), **_CAPACITY)
        try:
            self._write("PutItem", logical, lambda: self.client.call("PutItem", params))
        except ConditionLost:
            return False
        return True

    def _get(self, table: str, key: Item) -> Item | None:
        resp = self.client.call("GetItem", {"TableName": table, "Key": key,
                                            "ConsistentRead": True, **_CAPACITY})
        item: Item | None = resp.get("Item")
        return item

    def _query(self, params: dict[str, Any], limit: int | None = None) -> Iterator[Item]:
        params = {**params, **_CAPACITY}
        left = limit
        while True:
            if left is not None:
                params["Limit"] = left
            resp = self.client.call("Query", params)
            items: list[Item] = resp.get("Items", [])
            yield from items
            if left is not None:
                left -= len(items)
                if left <= 0:
                    return
            start = resp.get("LastEvaluatedKey")
            if not start:
                return
            params["ExclusiveStartKey"] = start

    def _update(self, logical: str, table: str, key: Item, expr: Expression, update: str,
                condition: str) -> Item:
        """One conditional UpdateItem; returns the new image.

        Raises:
            ConditionLost: with the item as it is now.
        """
        params = expr.params(TableName=table, Key=key, UpdateExpression=update,
                             ConditionExpression=condition, ReturnValues="ALL_NEW",
                             ReturnValuesOnConditionCheckFailure="ALL_OLD", **_CAPACITY)
        resp = self._write("UpdateItem", logical, lambda: self.client.call("UpdateItem", params))
        attributes: Item = resp["Attributes"]
        return attributes

    def _activity_conflict(self, lost: ConditionLost, activity_exec_id: str,
                           expected: str | list[str], transition: str | None) -> StateConflict:
        current = activity_record(lost.item) if lost.item else None
        return StateConflict(expected=expected,
                             actual=current.state.value if current and current.state else None,
                             activity_exec_id=activity_exec_id, transition=transition,
                             current=current)

    @staticmethod
    def _activity_key(activity_exec_id: str) -> Item:
        key = parse_activity_exec_id(activity_exec_id)
        return {"workflow_exec_id": {"S": key.workflow_exec_id},
                "activity_exec_id": {"S": activity_exec_id}}

    # -- workflow executions ---------------------------------------------------------------

    def create_workflow(self, record: WorkflowRecord) -> bool:
        if record.check_epoch is not None and record.check_shard is None:
            record = replace(record, check_shard=shard_of(record.workflow_exec_id,
                                                          specs.RECONCILE_SHARDS))
        item = record_item(record)
        item["name_state"] = {"S": name_state_key(record.workflow_name, record.state.value,
                                                  record.workflow_exec_id)}
        if record.created_day:
            item["created_day"] = {"S": day_key(record.workflow_exec_id)}
        # The id is derived from the request id: only the first start creates it.
        return self._put_new(self.workflow_table, "workflow_exec", item, "workflow_exec_id")

    def get_workflow(self, workflow_exec_id: str) -> WorkflowRecord | None:
        item = self._get(self.workflow_table, {"workflow_exec_id": {"S": workflow_exec_id}})
        return workflow_record(item) if item else None

    def move_workflow(self, workflow_exec_id: str, expected: Collection[WorkflowState],
                      new_state: WorkflowState, changes: Changes, *, now: float,
                      actor: str, workflow_name: str,
                      if_unchanged: Mapping[str, int] | None = None) -> WorkflowRecord:
        changes = index_changes(changes, workflow_exec_id=workflow_exec_id)
        expr = Expression()
        # The listing index's key moves in the same write as the state (never a second).
        update = expr.update({**changes, "state": new_state.value, "updated_epoch": now,
                              "name_state": name_state_key(workflow_name, new_state.value,
                                                           workflow_exec_id)},
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
            attributes = self._update("workflow_exec", self.workflow_table,
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
            self._update("workflow_exec", self.workflow_table,
                         {"workflow_exec_id": {"S": workflow_exec_id}}, expr, update, condition)
        except ConditionLost:
            return False
        return True

    def due_workflow_checks(self, now: float, limit: int) -> list[str]:
        def shard(k: int) -> list[str]:
            return [hit["workflow_exec_id"]["S"] for hit in self._query({
                "TableName": self.workflow_table, "IndexName": "reconcile",
                "KeyConditionExpression": "check_shard = :s AND check_epoch <= :n",
                "ExpressionAttributeValues": {":s": {"S": str(k)}, ":n": to_ddb(now)},
            }, limit=limit)]
        return [wx for hits in fan_out(shard, range(specs.RECONCILE_SHARDS)) for wx in hits]

    def batch_get_workflows(self, ids: Sequence[str]) -> list[WorkflowRecord]:
        found: dict[str, WorkflowRecord] = {}
        wanted = list(dict.fromkeys(ids))
        for start in range(0, len(wanted), 100):
            keys = [{"workflow_exec_id": {"S": i}} for i in wanted[start:start + 100]]
            request: dict[str, Any] = {self.workflow_table: {"Keys": keys,
                                                             "ConsistentRead": True}}
            while request:
                resp = self.client.call("BatchGetItem", {"RequestItems": request,
                                                         **_CAPACITY})
                for item in resp.get("Responses", {}).get(self.workflow_table, []):
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
        key_attr = specs.WORKFLOW_EXEC.index(index).hash_key.name
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
            "TableName": self.workflow_table, "IndexName": index, "Limit": limit,
            "KeyConditionExpression": cond, "ExpressionAttributeValues": values,
            "ScanIndexForward": False, **_CAPACITY}
        if start_key:
            params["ExclusiveStartKey"] = start_key
        resp = self.client.call("Query", params)
        keys = [(float(h["created_epoch"]["N"]), h["workflow_exec_id"]["S"])
                for h in resp.get("Items", [])]
        return WorkflowKeyPage(keys, resp.get("LastEvaluatedKey"))

    # -- activity executions -----------------------------------------------------------------

    def create_activity(self, record: ActivityRecord) -> bool:
        if record.timer_epoch is not None:
            record = replace(record, **index_changes({"timer_epoch": record.timer_epoch},
                                                     record.activity_exec_id))
        # Ids are deterministic (workflow, activity, attempt): a replayed start or retry
        # finds the row and must not reset its state.
        return self._put_new(self.activity_table, "activity_exec", record_item(record),
                             "activity_exec_id")

    def create_claimable(self, record: ActivityRecord,
                         claim: tuple[str, int] | None = None) -> bool:
        """Create an attempt that is READY to be claimed (claim keys derived here;
        ``claim``: where it is served and its priority, ``flow.claim_intent``)."""
        intent = (record.workflow_name, record.activity_name, *(claim or ()))
        keys = index_changes({"claimable": intent}, record.activity_exec_id)
        return self.create_activity(replace(record, **keys))

    def try_set_activity(self, activity_exec_id: str, changes: Changes, *,
                         states: Collection[ActivityState]) -> bool:
        """``set_activity`` that reports a refused condition as False."""
        try:
            self.set_activity(activity_exec_id, changes, states=states)
        except StateConflict:
            return False
        return True

    def get_activity(self, activity_exec_id: str) -> ActivityRecord | None:
        item = self._get(self.activity_table, self._activity_key(activity_exec_id))
        return activity_record(item) if item else None

    def list_activities(self, workflow_exec_id: str,
                        prefix: str | None = None) -> list[ActivityRecord]:
        """Every attempt of every activity of one execution: one consistent Query. With
        ``prefix``, only those whose activity name starts so (``"load:"``: the attempts
        of ``load``; ``"m#"``: the items of map ``m``)."""
        params: dict[str, Any] = {
            "TableName": self.activity_table, "ConsistentRead": True,
            "KeyConditionExpression": "workflow_exec_id = :w",
            "ExpressionAttributeValues": {":w": {"S": workflow_exec_id}}}
        if prefix:
            params["KeyConditionExpression"] += " AND begins_with(activity_exec_id, :p)"
            params["ExpressionAttributeValues"][":p"] = {"S": f"{workflow_exec_id}:{prefix}"}
        return [activity_record(i) for i in self._query(params)]

    def move_activity(self, activity_exec_id: str, expected: ActivityState,
                      path: Sequence[ActivityState], changes: Changes, *, now: float,
                      actor: str, due_by: float | None = None,
                      claimed: bool = False) -> ActivityRecord:
        changes = index_changes(changes, activity_exec_id)
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
        if claimed:
            # A claim takes only what is still in the claimable index: a suspend took
            # it out (and an index read may lag behind).
            condition += " AND " + expr.exists("claim_key")
        try:
            return activity_record(self._update(
                "activity_exec", self.activity_table, self._activity_key(activity_exec_id),
                expr, update, condition))
        except ConditionLost as lost:
            raise self._activity_conflict(lost, activity_exec_id, expected.value,
                                          final.value) from None

    def set_activity(self, activity_exec_id: str, changes: Changes, *,
                     states: Collection[ActivityState]) -> ActivityRecord:
        expr = Expression()
        update = expr.update(index_changes(changes, activity_exec_id))
        # Attributes other than the state, only while the state is one of ``states``
        # (e.g. a heartbeat only while the activity runs; never on a TIMED_OUT one).
        condition = expr.one_of("state", sorted(s.value for s in states))
        try:
            return activity_record(self._update(
                "activity_exec", self.activity_table, self._activity_key(activity_exec_id),
                expr, update, condition))
        except ConditionLost as lost:
            raise self._activity_conflict(lost, activity_exec_id,
                                          sorted(s.value for s in states), None) from None

    def due_timers(self, now: float, limit: int) -> list[Due]:
        """Armed deadlines at or before ``now``: the cost grows with what is due, not with
        what runs (the index is sparse)."""
        def shard(k: int) -> list[Due]:
            return [Due(hit["workflow_exec_id"]["S"], hit["activity_exec_id"]["S"])
                    for hit in self._query({
                        "TableName": self.activity_table, "IndexName": "timers",
                        "KeyConditionExpression": "timer_shard = :s AND timer_epoch <= :n",
                        "ExpressionAttributeValues": {":s": {"S": str(k)},
                                                      ":n": to_ddb(now)},
                    }, limit=limit)]
        return [d for part in fan_out(shard, range(specs.TIMER_SHARDS)) for d in part]

    def claimable(self, shard: str, key_prefix: str, limit: int) -> list[ActivityRecord]:
        """READY external attempts of one shard, as partial records (what the index
        projects). Eventually consistent: a hit may already be taken."""
        cond = "claim_shard = :s"
        values: dict[str, Any] = {":s": {"S": shard}}
        if key_prefix:
            cond += " AND begins_with(claim_key, :p)"
            values[":p"] = {"S": key_prefix}
        return [activity_record(i) for i in self._query({
            "TableName": self.activity_table, "IndexName": "claimable",
            "KeyConditionExpression": cond, "ExpressionAttributeValues": values},
            limit=limit)]

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
                request = {self.edge_table: items[start:start + 25]}
                while request:
                    resp = self.client.call("BatchWriteItem", {"RequestItems": request,
                                                               **_CAPACITY})
                    request = resp.get("UnprocessedItems") or {}
        self._write("BatchWriteItem", "activity_exec_dependency", put)

    def delete_dependency(self, workflow_exec_id: str, downstream: str, upstream: str) -> None:
        params = {"TableName": self.edge_table, **_CAPACITY,
                  "Key": {"dependency_key": {"S": self.dependency_key(workflow_exec_id,
                                                                      downstream)},
                          "upstream": {"S": upstream}}}
        self._write("DeleteItem", "activity_exec_dependency",
                    lambda: self.client.call("DeleteItem", params))

    def pending_dependencies(self, workflow_exec_id: str, downstream: str,
                             limit: int | None = 1) -> list[str]:
        """Upstreams of ``downstream`` still not completed (consistent; Limit 1 is O(1))."""
        return [i["upstream"]["S"] for i in self._query({
            "TableName": self.edge_table, "ConsistentRead": True,
            "KeyConditionExpression": "dependency_key = :k",
            "ExpressionAttributeValues": {":k": {"S": self.dependency_key(workflow_exec_id,
                                                                          downstream)}}},
            limit=limit)]
