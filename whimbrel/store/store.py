"""Whimbrel's DynamoDB store: the engine's :class:`~whimbrel.engine.ports.StorePort`.

Two halves. The hot tables (executions and fan-in edges, :mod:`whimbrel.store.runs`) go
through the lean client; the cold ones (definitions, requests, events, rejections) and
table management go through PynamoDB models and boto3. Both halves meter every request
and run the write hooks (fault injection) around every write.

The engine speaks intent; index keys are derived here: a change set carrying
``timer_epoch`` arms the sparse ``timers`` index (its shard is added), ``check_epoch``
the ``reconcile`` index, and ``claimable`` (``(workflow_name, activity_name)`` or
``REMOVE``) the ``claimable`` index.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import boto3
import botocore.session
from botocore.config import Config
from pynamodb.models import Model

from whimbrel.contract.errors import StateConflict
from whimbrel.contract.ids import END_NODE, shard_of
from whimbrel.contract.records import (
    REMOVE,
    ActivityRecord,
    Changes,
    DefinitionRecord,
    EventRecord,
    RejectionRecord,
    RequestRecord,
    WorkflowRecord,
)
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.settings import DEFAULT_TABLE_PREFIX
from whimbrel.store import specs
from whimbrel.store.codec import from_ddb
from whimbrel.store.errors import ConditionFailed, translated
from whimbrel.store.lean import DynamoClient
from whimbrel.store.meter import CapacityMeter
from whimbrel.store.models import BoundModels, bind_models
from whimbrel.store.notifications import NotificationMarkers
from whimbrel.store.runs import WorkflowKeyPage
from whimbrel.store.signals import SignalTables

__all__ = ["END_NODE", "Store", "WorkflowKeyPage", "WriteHook", "index_changes"]


class WriteHook(Protocol):
    """Called around every write: ``phase`` is ``"before"`` or ``"after"``.

    The reliability tests use it to crash a process between any two writes.
    """

    def __call__(self, phase: str, operation: str, table: str) -> None: ...


def index_changes(changes: Changes, activity_exec_id: str | None = None,
                  workflow_exec_id: str | None = None) -> dict[str, Any]:
    """``changes`` with the sparse-index keys derived from the engine's intent."""
    out = dict(changes)
    if "timer_epoch" in out and activity_exec_id:
        out["timer_shard"] = (REMOVE if out["timer_epoch"] is REMOVE
                              else shard_of(activity_exec_id, specs.TIMER_SHARDS))
    if "check_epoch" in out and workflow_exec_id:
        out["check_shard"] = (REMOVE if out["check_epoch"] is REMOVE
                              else shard_of(workflow_exec_id, specs.RECONCILE_SHARDS))
    if "claimable" in out:
        claim = out.pop("claimable")
        if claim is REMOVE or not claim or not activity_exec_id:
            out["claim_shard"] = out["claim_key"] = REMOVE
        else:
            workflow_name, activity_name = claim
            out["claim_shard"] = shard_of(activity_exec_id, specs.CLAIM_SHARDS)
            out["claim_key"] = f"{workflow_name}/{activity_name}/{activity_exec_id}"
    return out


class Store(SignalTables, NotificationMarkers):
    """Tables of one prefix at one endpoint. Safe to share between threads."""

    def __init__(
        self,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        endpoint_url: str | None = None,
        region: str | None = None,
        meter: CapacityMeter | None = None,
    ) -> None:
        self.table_prefix = table_prefix
        self.endpoint_url = endpoint_url
        self.region = region or "us-east-1"
        self.meter = meter or CapacityMeter()
        self.claim_shards = tuple(str(i) for i in range(specs.CLAIM_SHARDS))
        self.write_hooks: list[WriteHook] = []
        client = DynamoClient(endpoint_url, self.region)
        client.observers.append(lambda op, _params, resp: self.meter.record(op, resp))
        super().__init__(client, table_prefix, self._write)
        self.models: BoundModels = bind_models(table_prefix, host=endpoint_url,
                                               region=self.region)
        for model in self.models.cold():
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
        result = fn()
        for hook in self.write_hooks:
            hook("after", operation, table)
        return result

    def _cold_write(self, operation: str, table: str, fn: Callable[[], Any]) -> Any:
        with translated(f"{operation} {table}"):
            return self._write(operation, table, fn)

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
        """Create every missing table, with TTL on (idempotent). Returns the names created."""
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
                        TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
            for spec in specs.TABLES:
                if spec.ttl_attribute and spec.table_name(self.table_prefix) in created:
                    client.update_time_to_live(
                        TableName=spec.table_name(self.table_prefix),
                        TimeToLiveSpecification={"Enabled": True,
                                                 "AttributeName": spec.ttl_attribute})
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

    def latest_definition(self, name: str) -> DefinitionRecord | None:
        m = self.models.workflow_definition
        with translated("Query workflow_definition"):
            for item in m.query(name, scan_index_forward=False, limit=1, consistent_read=True):
                return _definition(item)
        return None

    def get_definition(self, name: str, version: int) -> DefinitionRecord | None:
        m = self.models.workflow_definition
        with translated("GetItem workflow_definition"):
            try:
                return _definition(m.get(name, version, consistent_read=True))
            except m.DoesNotExist:
                return None

    def put_definition(self, record: DefinitionRecord) -> bool:
        """Write a new version; False if that version exists already."""
        m = self.models.workflow_definition
        item = m(record.workflow_name, record.version, definition=record.definition,
                 created_epoch=record.created_epoch, description=record.description or None,
                 catalog=specs.CATALOG)
        try:
            # Versions are immutable: never overwrite one (a concurrent register of the
            # same version loses here and retries with the next number).
            self._cold_write("PutItem", "workflow_definition",
                             lambda: item.save(condition=m.version.does_not_exist()))
        except ConditionFailed:
            return False
        return True

    def list_definitions(self) -> Iterator[DefinitionRecord]:
        """All versions of all definitions (an operator listing, not a per-run path)."""
        with translated("Scan workflow_definition"):
            for item in self.models.workflow_definition.scan():
                yield _definition(item)

    def definition_versions(self, name: str) -> list[DefinitionRecord]:
        with translated("Query workflow_definition"):
            return [_definition(i) for i in
                    self.models.workflow_definition.query(name, scan_index_forward=False)]

    # -- requests, events, rejections ----------------------------------------------------

    def put_request(self, record: RequestRecord) -> bool:
        m = self.models.workflow_request
        item = m(**{k: v for k, v in _fields(record).items()
                    if k not in ("outcome", "reason", "processed_epoch")})
        try:
            # A request id names one request forever; a retry of the same put is a no-op.
            self._cold_write("PutItem", "workflow_request",
                             lambda: item.save(condition=m.workflow_request_id.does_not_exist()))
        except ConditionFailed:
            return False
        return True

    def get_request(self, request_id: str) -> RequestRecord | None:
        # Read raw, not through the model: a client's row may carry ``input`` as a native
        # map or list (docs/simple-api.md allows it), which is kept here as JSON text.
        with translated("GetItem workflow_request"):
            item = self._get(self.table_name("workflow_request"),
                             {"workflow_request_id": {"S": request_id}})
        if item is None:
            return None
        fields: dict[str, Any] = {}
        for name in _fields_of(RequestRecord):
            if name in item:
                value = from_ddb(item[name])
                if name == "input" and value is not None and not isinstance(value, str):
                    value = json.dumps(value)
                fields[name] = value
        fields.setdefault("workflow_name", "")
        fields.setdefault("when_epoch", 0.0)
        fields["manual"] = bool(fields.get("manual", False))
        return RequestRecord(**fields)


    def mark_request(self, request_id: str, changes: Changes) -> None:
        """Record what processing did with a client's request row."""
        m = self.models.workflow_request
        # Only a client's row (never a Full Logic trace, whose run is its record).
        self._mark(m, m.workflow_request_id, "workflow_request", request_id, changes,
                   m.manual.does_not_exist() | (m.manual == False))  # noqa: E712

    def expire_request(self, request_id: str, expires_epoch: float) -> None:
        m = self.models.workflow_request
        self._mark(m, m.workflow_request_id, "workflow_request", request_id,
                   {"expires_epoch": expires_epoch})

    def _mark(self, m: Any, key_attr: Any, table: str, key: str, changes: Changes,
              also: Any = None) -> None:
        actions = [getattr(m, k).set(v) for k, v in changes.items()]
        # Only an existing row: a record replayed after the row expired is not revived.
        condition = key_attr.exists() if also is None else key_attr.exists() & also
        # ReturnValues NONE: the row is never read back into the model, so a client's
        # native-typed attribute (an ``input`` or ``output`` map) cannot fail the mark of
        # a row already applied (issue 20).
        try:
            self._cold_write("UpdateItem", table, lambda: m._get_connection().update_item(
                key, actions=actions, condition=condition, return_values="NONE"))
        except ConditionFailed:
            pass

    def put_event(self, record: EventRecord) -> bool:
        m = self.models.activity_event
        fields = _fields(record)
        fields.pop("extra", None)
        item = m(**fields)
        try:
            # Event ids are unique; a retried put must not create a second event.
            self._cold_write("PutItem", "activity_event",
                             lambda: item.save(condition=m.activity_event_id.does_not_exist()))
        except ConditionFailed:
            return False
        return True

    def mark_event(self, event_id: str, changes: Changes) -> None:
        m = self.models.activity_event
        self._mark(m, m.activity_event_id, "activity_event", event_id, changes)

    def put_rejection(self, record: RejectionRecord) -> None:
        # Rejections are a log: the id is unique per record, so a replay overwrites the
        # same row with the same content.
        item = self.models.rejection(**_fields(record))
        self._cold_write("PutItem", "rejection", item.save)

    def list_rejections(self, day: str, limit: int | None = None) -> list[RejectionRecord]:
        with translated("Query rejection"):
            return [RejectionRecord(**{k: getattr(i, k) for k in _fields_of(RejectionRecord)})
                    for i in self.models.rejection.query(day, scan_index_forward=False,
                                                         limit=limit)]

    # -- executions: intent to index keys ----------------------------------------------

    def create_workflow(self, record: WorkflowRecord) -> bool:
        if record.check_epoch is not None and record.check_shard is None:
            record = _replace(record, check_shard=shard_of(record.workflow_exec_id,
                                                           specs.RECONCILE_SHARDS))
        return super().create_workflow(record)

    def move_workflow(self, workflow_exec_id: str, expected: Collection[WorkflowState],
                      new_state: WorkflowState, changes: Changes, *, now: float,
                      actor: str, workflow_name: str,
                      if_unchanged: Mapping[str, int] | None = None) -> WorkflowRecord:
        return super().move_workflow(
            workflow_exec_id, expected, new_state,
            index_changes(changes, workflow_exec_id=workflow_exec_id), now=now, actor=actor,
            workflow_name=workflow_name, if_unchanged=if_unchanged)

    def set_workflow(self, workflow_exec_id: str, changes: Changes, *,
                     states: Collection[WorkflowState]) -> bool:
        return super().set_workflow(
            workflow_exec_id, index_changes(changes, workflow_exec_id=workflow_exec_id),
            states=states)

    def create_activity(self, record: ActivityRecord) -> bool:
        extra = index_changes({k: getattr(record, k) for k in ("timer_epoch",)
                               if getattr(record, k) is not None}, record.activity_exec_id)
        if extra:
            record = _replace(record, **extra)
        return super().create_activity(record)

    def create_claimable(self, record: ActivityRecord) -> bool:
        """Create an attempt that is READY to be claimed (claim keys derived here)."""
        keys = index_changes({"claimable": (record.workflow_name, record.activity_name)},
                             record.activity_exec_id)
        return self.create_activity(_replace(record, **keys))

    def move_activity(self, activity_exec_id: str, expected: ActivityState,
                      path: Sequence[ActivityState], changes: Changes, *, now: float,
                      actor: str, due_by: float | None = None,
                      claimed: bool = False) -> ActivityRecord:
        return super().move_activity(activity_exec_id, expected, path,
                                     index_changes(changes, activity_exec_id),
                                     now=now, actor=actor, due_by=due_by, claimed=claimed)

    def set_activity(self, activity_exec_id: str, changes: Changes, *,
                     states: Collection[ActivityState]) -> ActivityRecord:
        return super().set_activity(activity_exec_id, index_changes(changes, activity_exec_id),
                                    states=states)

    def try_set_activity(self, activity_exec_id: str, changes: Changes, *,
                         states: Collection[ActivityState]) -> bool:
        """``set_activity`` that reports a refused condition as False."""
        try:
            self.set_activity(activity_exec_id, changes, states=states)
        except StateConflict:
            return False
        return True

    def workflow_names(self) -> list[str]:
        """Every registered workflow name (one Query of the catalog index)."""
        idx = self.models.indexes["workflow_definition.all_names"]
        with translated("Query workflow_definition.all_names"):
            return sorted({hit.workflow_name for hit in idx.query(specs.CATALOG)})


def _fields_of(cls: type) -> tuple[str, ...]:
    return tuple(cls.__dataclass_fields__)  # type: ignore[attr-defined]


def _fields(record: Any) -> dict[str, Any]:
    return {k: getattr(record, k) for k in _fields_of(type(record))}


def _replace(record: Any, **changes: Any) -> Any:
    return replace(record, **changes)


def _definition(item: Any) -> DefinitionRecord:
    return DefinitionRecord(item.workflow_name, int(item.version), item.definition,
                            float(item.created_epoch), item.description)


_SESSION_LOCK = threading.Lock()
_SESSION: botocore.session.Session | None = None


def _create_client_now(model: type[Model]) -> None:
    """Give the model's connection its botocore client now, from one shared session.

    PynamoDB keeps a botocore session per thread and creates the client lazily without
    a lock, so the first burst of calls from many threads built a client (and parsed the
    DynamoDB service model, ~40 ms of CPU) per thread and model. One session loads the
    model once; the client exists before any thread asks for it.
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

