"""Whimbrel's DynamoDB store: every read and conditional write the engine makes.

Each write states its condition and why. A lost condition surfaces as
:class:`~whimbrel.store.errors.ConditionFailed` to the engine (which reads the actual
state back and raises ``StateConflict``); every other AWS error becomes ``StoreError``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import boto3
import botocore.session
from botocore.config import Config
from pynamodb.expressions.update import Action
from pynamodb.models import Model

from whimbrel.contract.ids import parse_activity_exec_id, shard_of
from whimbrel.store import specs
from whimbrel.store.errors import ConditionFailed, translated
from whimbrel.store.meter import CapacityMeter
from whimbrel.store.models import (
    ActivityEventModel,
    ActivityExecModel,
    BoundModels,
    RejectionModel,
    WorkflowDefinitionModel,
    WorkflowExecModel,
    WorkflowRequestModel,
    bind_models,
    history_entry,
)

__all__ = ["ConditionFailed", "Store", "WorkflowKeyPage", "WriteHook"]


class WriteHook(Protocol):
    """Called around every write: ``phase`` is ``"before"`` or ``"after"``.

    The reliability tests use it to crash a process between any two writes.
    """

    def __call__(self, phase: str, operation: str, table: str) -> None: ...


END_NODE = "__end__"


@dataclass(frozen=True)
class WorkflowKeyPage:
    """Entries of one listing-index Query: ``(created_epoch, workflow_exec_id)`` newest
    first, and the key to continue from (None when the partition has no more)."""

    keys: list[tuple[float, str]]
    last_key: dict[str, Any] | None


class Store:
    """Tables of one prefix at one endpoint. Safe to share between threads."""

    def __init__(
        self,
        *,
        table_prefix: str = specs.DEFAULT_TABLE_PREFIX,
        endpoint_url: str | None = None,
        region: str | None = None,
        meter: CapacityMeter | None = None,
    ) -> None:
        self.table_prefix = table_prefix
        self.endpoint_url = endpoint_url
        self.region = region or "us-east-1"
        self.meter = meter or CapacityMeter()
        self.models: BoundModels = bind_models(table_prefix, host=endpoint_url, region=self.region)
        self.write_hooks: list[WriteHook] = []
        for model in self.models.all():
            _create_client_now(model)
            self._meter_connection(model)

    # -- plumbing --------------------------------------------------------------------

    def _meter_connection(self, model: type[Model]) -> None:
        conn = model._get_connection().connection
        inner = conn.dispatch
        meter = self.meter

        def dispatch(operation_name: str, operation_kwargs: dict[str, Any]) -> dict[str, Any]:
            data: dict[str, Any] = inner(operation_name, operation_kwargs)
            meter.record(operation_name, data)
            return data

        conn.dispatch = dispatch  # type: ignore[method-assign]

    def _write(self, operation: str, table: str, fn: Callable[[], Any]) -> Any:
        for hook in self.write_hooks:
            hook("before", operation, table)
        with translated(f"{operation} {table}"):
            result = fn()
        for hook in self.write_hooks:
            hook("after", operation, table)
        return result

    def boto_client(self) -> Any:
        return boto3.client(
            "dynamodb",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            config=Config(retries={"max_attempts": 5, "mode": "standard"}),
        )

    def table_name(self, logical: str) -> str:
        return specs.table_spec(logical).table_name(self.table_prefix)

    # -- tables ----------------------------------------------------------------------

    def create_tables(self, *, wait: bool = True) -> list[str]:
        """Create every missing table (idempotent). Returns the names created."""
        client = self.boto_client()
        created: list[str] = []
        with translated("CreateTable"):
            existing = set()
            for page in client.get_paginator("list_tables").paginate():
                existing.update(page.get("TableNames", []))
            for spec in specs.TABLES:
                name = spec.table_name(self.table_prefix)
                if name in existing:
                    continue
                try:
                    client.create_table(**specs.create_table_request(spec, self.table_prefix))
                except client.exceptions.ResourceInUseException:
                    continue  # created concurrently by someone else: fine
                created.append(name)
            if wait:
                for name in created:
                    client.get_waiter("table_exists").wait(
                        TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
                    )
            for spec in specs.TABLES:
                if spec.ttl_attribute and spec.table_name(self.table_prefix) in created:
                    client.update_time_to_live(
                        TableName=spec.table_name(self.table_prefix),
                        TimeToLiveSpecification={
                            "Enabled": True,
                            "AttributeName": spec.ttl_attribute,
                        },
                    )
        return created

    def delete_tables(self) -> None:
        client = self.boto_client()
        with translated("DeleteTable"):
            for spec in specs.TABLES:
                try:
                    client.delete_table(TableName=spec.table_name(self.table_prefix))
                except client.exceptions.ResourceNotFoundException:
                    pass

    # -- definitions -----------------------------------------------------------------

    def latest_definition(self, name: str) -> WorkflowDefinitionModel | None:
        m = self.models.workflow_definition
        with translated("Query workflow_definition"):
            for item in m.query(name, scan_index_forward=False, limit=1, consistent_read=True):
                return item
        return None

    def get_definition(self, name: str, version: int) -> WorkflowDefinitionModel | None:
        with translated("GetItem workflow_definition"):
            try:
                return self.models.workflow_definition.get(name, version, consistent_read=True)
            except self.models.workflow_definition.DoesNotExist:
                return None

    def put_definition(self, name: str, version: int, definition_json: str, now: float,
                       description: str | None) -> bool:
        """Write version ``version``; False if that version exists already."""
        m = self.models.workflow_definition
        item = m(name, version, definition=definition_json, created_epoch=now,
                 description=description or None)
        try:
            # Versions are immutable: never overwrite one (a concurrent register of the
            # same version loses here and retries with the next number).
            self._write("PutItem", "workflow_definition",
                        lambda: item.save(condition=m.version.does_not_exist()))
        except ConditionFailed:
            return False
        return True

    def list_definitions(self) -> Iterator[WorkflowDefinitionModel]:
        """All versions of all definitions (an operator listing, not a per-run path)."""
        with translated("Scan workflow_definition"):
            yield from self.models.workflow_definition.scan()

    def definition_versions(self, name: str) -> list[WorkflowDefinitionModel]:
        with translated("Query workflow_definition"):
            return list(self.models.workflow_definition.query(name, scan_index_forward=False))

    # -- requests and events -----------------------------------------------------------

    def put_request(self, item: WorkflowRequestModel) -> bool:
        m = self.models.workflow_request
        try:
            # A request id names one request forever; a retry of the same put is a no-op.
            self._write("PutItem", "workflow_request",
                        lambda: item.save(condition=m.workflow_request_id.does_not_exist()))
        except ConditionFailed:
            return False
        return True

    def get_request(self, request_id: str) -> WorkflowRequestModel | None:
        with translated("GetItem workflow_request"):
            try:
                return self.models.workflow_request.get(request_id, consistent_read=True)
            except self.models.workflow_request.DoesNotExist:
                return None

    def put_event(self, item: ActivityEventModel) -> bool:
        m = self.models.activity_event
        try:
            # Event ids are unique; a retried put must not create a second event.
            self._write("PutItem", "activity_event",
                        lambda: item.save(condition=m.activity_event_id.does_not_exist()))
        except ConditionFailed:
            return False
        return True

    def put_rejection(self, item: RejectionModel) -> None:
        # Rejections are a log: the id is unique per record, so a replay overwrites
        # the same row with the same content.
        self._write("PutItem", "rejection", item.save)

    def list_rejections(self, day: str, limit: int | None = None) -> list[RejectionModel]:
        with translated("Query rejection"):
            return list(self.models.rejection.query(day, scan_index_forward=False, limit=limit))

    # -- workflow executions ---------------------------------------------------------

    def create_workflow(self, item: WorkflowExecModel) -> bool:
        m = self.models.workflow_exec
        # The listing indexes' keys go in the same write as the state (never a second).
        item.name_state, item.state_shard = self._state_keys(
            item.workflow_exec_id, item.workflow_name, item.state)
        try:
            # The id is derived from the request id: only the first start creates it.
            self._write("PutItem", "workflow_exec",
                        lambda: item.save(condition=m.workflow_exec_id.does_not_exist()))
        except ConditionFailed:
            return False
        return True

    def get_workflow(self, workflow_exec_id: str) -> WorkflowExecModel | None:
        with translated("GetItem workflow_exec"):
            try:
                return self.models.workflow_exec.get(workflow_exec_id, consistent_read=True)
            except self.models.workflow_exec.DoesNotExist:
                return None

    @staticmethod
    def _state_keys(workflow_exec_id: str, workflow_name: str, state: str) -> tuple[str, str]:
        """(name_state, state_shard): the by_name_state and by_state keys of a state."""
        shard = shard_of(workflow_exec_id, specs.STATE_SHARDS)
        return (specs.name_state_key(workflow_name, state),
                specs.state_shard_key(state, shard))

    def move_workflow(self, workflow_exec_id: str, expected: Sequence[str], new_state: str,
                      now: float, *, workflow_name: str, actor: str,
                      extra: Iterable[Action] = ()) -> WorkflowExecModel:
        """Conditionally move a workflow execution from one of ``expected`` to ``new_state``.

        ``workflow_name`` (the execution's own, read by the caller) keys the listing
        indexes, which this same write moves along with the state.

        Raises:
            ConditionFailed: it was not in any expected state (or does not exist).
        """
        m = self.models.workflow_exec
        item = m(workflow_exec_id)
        name_state, state_shard = self._state_keys(workflow_exec_id, workflow_name, new_state)
        actions: list[Action] = [
            m.state.set(new_state),
            m.name_state.set(name_state),
            m.state_shard.set(state_shard),
            m.updated_epoch.set(now),
            m.history.set(m.history.append([history_entry(state=new_state, at=now, by=actor)])),
            *extra,
        ]
        # state IN expected: the contract's single-writer rule for a state change.
        condition = m.state.is_in(*expected)
        self._write("UpdateItem", "workflow_exec",
                    lambda: item.update(actions=actions, condition=condition))
        return item

    def set_workflow_check(self, workflow_exec_id: str, shard: str, check_epoch: float,
                           expected: Sequence[str]) -> bool:
        """Re-arm the reconcile timer of a non-terminal workflow."""
        m = self.models.workflow_exec
        item = m(workflow_exec_id)
        try:
            # Only while still non-terminal: a finished execution must leave the index.
            self._write("UpdateItem", "workflow_exec", lambda: item.update(
                actions=[m.check_shard.set(shard), m.check_epoch.set(check_epoch)],
                condition=m.state.is_in(*expected)))
        except ConditionFailed:
            return False
        return True

    def clear_workflow_check(self, workflow_exec_id: str) -> None:
        m = self.models.workflow_exec
        item = m(workflow_exec_id)
        try:
            # Only touch an existing item (an unconditional update would create one).
            self._write("UpdateItem", "workflow_exec", lambda: item.update(
                actions=[m.check_shard.remove(), m.check_epoch.remove()],
                condition=m.workflow_exec_id.exists()))
        except ConditionFailed:
            pass

    def due_workflow_checks(self, now: float, limit: int) -> list[str]:
        idx = self.models.indexes["workflow_exec.reconcile"]
        out: list[str] = []
        with translated("Query workflow_exec.reconcile"):
            for shard in range(specs.RECONCILE_SHARDS):
                for hit in idx.query(str(shard), idx.Meta.attributes["check_epoch"] <= now,
                                     limit=limit):
                    out.append(hit.workflow_exec_id)
        return out

    def batch_get_workflows(self, ids: Sequence[str]) -> list[WorkflowExecModel]:
        if not ids:
            return []
        with translated("BatchGetItem workflow_exec"):
            found = {w.workflow_exec_id: w for w in self.models.workflow_exec.batch_get(ids)}
        return [found[i] for i in ids if i in found]

    def query_workflow_keys(self, index: str, hash_key: str, *, low: float | None,
                            high: float | None, limit: int,
                            start_key: dict[str, Any] | None = None) -> WorkflowKeyPage:
        """One Query of a listing index (``by_name``, ``by_day``, ``by_name_state``,
        ``by_state``) of ``workflow_exec``: newest first, ``low <= created_epoch <=
        high`` (either bound may be None), at most ``limit`` entries.

        Reads only index keys (every listing index is KEYS_ONLY): the cost is ``limit``
        small entries, whatever the partition holds. Pass ``start_key`` (the previous
        page's ``last_key``) to go on where it stopped.
        """
        idx = self.models.indexes[f"workflow_exec.{index}"]
        epoch = idx.Meta.attributes["created_epoch"]
        condition: Any = None
        if low is not None and high is not None:
            condition = epoch.between(low, high)
        elif low is not None:
            condition = epoch >= low
        elif high is not None:
            condition = epoch <= high
        with translated(f"Query workflow_exec.{index}"):
            hits = idx.query(hash_key, condition, scan_index_forward=False, limit=limit,
                             page_size=limit, last_evaluated_key=start_key)
            keys = [(float(h.created_epoch), h.workflow_exec_id) for h in hits]
            return WorkflowKeyPage(keys, hits.last_evaluated_key)

    # -- activity executions -----------------------------------------------------------

    def create_activity(self, item: ActivityExecModel) -> bool:
        m = self.models.activity_exec
        try:
            # Ids are deterministic (workflow, activity, attempt): a replayed start or
            # retry finds the row and must not reset its state.
            self._write("PutItem", "activity_exec",
                        lambda: item.save(condition=m.activity_exec_id.does_not_exist()))
        except ConditionFailed:
            return False
        return True

    def get_activity(self, activity_exec_id: str) -> ActivityExecModel | None:
        key = parse_activity_exec_id(activity_exec_id)
        with translated("GetItem activity_exec"):
            try:
                return self.models.activity_exec.get(key.workflow_exec_id, activity_exec_id,
                                                     consistent_read=True)
            except self.models.activity_exec.DoesNotExist:
                return None

    def list_activities(self, workflow_exec_id: str) -> list[ActivityExecModel]:
        """Every attempt of every activity of one execution: one consistent Query."""
        with translated("Query activity_exec"):
            return list(self.models.activity_exec.query(workflow_exec_id, consistent_read=True))

    def move_activity(self, activity_exec_id: str, expected: str, new_state: str, now: float,
                      *, actor: str, extra: Iterable[Action] = (),
                      condition_extra: Any = None) -> ActivityExecModel:
        """Conditionally move one activity from ``expected`` to ``new_state``.

        Raises:
            ConditionFailed: it was not in ``expected`` (another actor got there first).
        """
        key = parse_activity_exec_id(activity_exec_id)
        m = self.models.activity_exec
        item = m(key.workflow_exec_id, activity_exec_id)
        actions: list[Action] = [
            m.state.set(new_state),
            m.updated_epoch.set(now),
            m.history.set(m.history.append([history_entry(state=new_state, at=now, by=actor)])),
            *extra,
        ]
        # state = :expected is the whole contract: one winner per move.
        condition = m.state == expected
        if condition_extra is not None:
            condition = condition & condition_extra
        self._write("UpdateItem", "activity_exec",
                    lambda: item.update(actions=actions, condition=condition))
        return item

    def update_activity(self, activity_exec_id: str, actions: Sequence[Action],
                        condition: Any) -> ActivityExecModel:
        """Update attributes other than the state, under ``condition``.

        Raises:
            ConditionFailed: the condition was false.
        """
        key = parse_activity_exec_id(activity_exec_id)
        m = self.models.activity_exec
        item = m(key.workflow_exec_id, activity_exec_id)
        self._write("UpdateItem", "activity_exec",
                    lambda: item.update(actions=list(actions), condition=condition))
        return item

    def due_timers(self, now: float, limit: int) -> list[tuple[str, str]]:
        """(workflow_exec_id, activity_exec_id) whose armed deadline has passed.

        Reads only the sparse index's entries at or before ``now``: the cost grows with
        the number of stale activities, not with the number running.
        """
        idx = self.models.indexes["activity_exec.timers"]
        out: list[tuple[str, str]] = []
        with translated("Query activity_exec.timers"):
            for shard in range(specs.TIMER_SHARDS):
                for hit in idx.query(str(shard), idx.Meta.attributes["timer_epoch"] <= now,
                                     limit=limit):
                    out.append((hit.workflow_exec_id, hit.activity_exec_id))
        return out

    def claimable(self, shard: str, key_prefix: str, limit: int) -> list[ActivityExecModel]:
        """READY external attempts of one shard, as partial items: keys plus the
        attributes the index projects (specs.ACTIVITY_EXEC ``claimable``). Eventually
        consistent: a hit may already be taken."""
        idx = self.models.indexes["activity_exec.claimable"]
        cond = idx.Meta.attributes["claim_key"].startswith(key_prefix) if key_prefix else None
        with translated("Query activity_exec.claimable"):
            return list(idx.query(shard, cond, limit=limit))

    # -- fan-in edges -----------------------------------------------------------------

    @staticmethod
    def dependency_key(workflow_exec_id: str, downstream: str) -> str:
        return f"{workflow_exec_id}/{downstream}"

    def put_dependencies(self, workflow_exec_id: str, downstream: str,
                         upstreams: Iterable[str]) -> None:
        m = self.models.dependency
        key = self.dependency_key(workflow_exec_id, downstream)
        # Unconditional batch put: edges are only created while the workflow is still
        # REQUESTED, before any upstream can complete (docs/architecture.md).
        def put() -> None:
            with m.batch_write() as batch:
                for up in upstreams:
                    batch.save(m(key, up))
        self._write("BatchWriteItem", "activity_exec_dependency", put)

    def delete_dependency(self, workflow_exec_id: str, downstream: str, upstream: str) -> None:
        m = self.models.dependency
        item = m(self.dependency_key(workflow_exec_id, downstream), upstream)
        self._write("DeleteItem", "activity_exec_dependency", item.delete)

    def pending_dependencies(self, workflow_exec_id: str, downstream: str,
                             limit: int | None = 1) -> list[str]:
        """Upstreams of ``downstream`` still not completed (consistent; Limit 1 is O(1))."""
        m = self.models.dependency
        with translated("Query activity_exec_dependency"):
            return [d.upstream for d in m.query(self.dependency_key(workflow_exec_id, downstream),
                                                consistent_read=True, limit=limit)]


_SESSION_LOCK = threading.Lock()
_SESSION: botocore.session.Session | None = None


def _create_client_now(model: type[Model]) -> None:
    """Give the model's connection its botocore client now, from one shared session.

    PynamoDB keeps a botocore session per thread and creates the client lazily without
    a lock, so the first burst of calls from many threads built a client (and parsed the
    DynamoDB service model, ~40 ms of CPU) per thread and model: hundreds of times in a
    busy process. One session loads the model once; the client exists before any
    thread asks for it; botocore clients are thread-safe.
    """
    global _SESSION
    conn = model._get_connection().connection
    with _SESSION_LOCK:
        if _SESSION is None:
            _SESSION = botocore.session.get_session()
        conn._local.session = _SESSION  # read by PynamoDB only while creating the client
        conn.client  # noqa: B018 - creates and caches it


def now_epoch() -> float:
    return time.time()
