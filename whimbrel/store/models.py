"""PynamoDB models for the tables in :mod:`whimbrel.store.specs`.

Table names carry a configurable prefix and tests use many prefixes in one process,
so concrete model classes are *bound* per (prefix, endpoint) by :func:`bind_models`.
The attribute declarations below are the schema of each item; keys and index names
come from the specs (a unit test checks the two agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from pynamodb.attributes import (
    BooleanAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    UnicodeAttribute,
)
from pynamodb.indexes import (
    AllProjection,
    GlobalSecondaryIndex,
    IncludeProjection,
    KeysOnlyProjection,
    Projection,
)
from pynamodb.models import Model

from whimbrel.store import specs


class HistoryEntry(MapAttribute[str, Any]):
    """One state change, kept on the item it happened to (no extra write)."""

    state = UnicodeAttribute()
    at = NumberAttribute()
    by = UnicodeAttribute(null=True)


def history_entry(state: str, at: float, by: str | None) -> HistoryEntry:
    """A typed constructor (PynamoDB's MapAttribute ``__init__`` is untyped)."""
    entry: HistoryEntry = HistoryEntry(state=state, at=at, by=by)  # type: ignore[no-untyped-call]
    return entry


class WorkflowDefinitionModel(Model):
    workflow_name = UnicodeAttribute(hash_key=True)
    version = NumberAttribute(range_key=True)
    #: Key of the catalog index (always specs.CATALOG).
    catalog = UnicodeAttribute(null=True)
    definition = UnicodeAttribute()  # canonical JSON of the WorkflowDefinition
    created_epoch = NumberAttribute()
    description = UnicodeAttribute(null=True)


class WorkflowRequestModel(Model):
    workflow_request_id = UnicodeAttribute(hash_key=True)
    workflow_name = UnicodeAttribute()
    version = NumberAttribute(null=True)
    input = UnicodeAttribute(null=True)
    manual = BooleanAttribute(default=False)
    source = UnicodeAttribute(null=True)
    when_epoch = NumberAttribute()
    workflow_exec_id = UnicodeAttribute(null=True)
    expires_epoch = NumberAttribute(null=True)
    # What processing did with the row, written by Whimbrel for its sender to read.
    outcome = UnicodeAttribute(null=True)
    processed_epoch = NumberAttribute(null=True)
    result_state = UnicodeAttribute(null=True)
    reason = UnicodeAttribute(null=True)


class WorkflowExecModel(Model):
    workflow_exec_id = UnicodeAttribute(hash_key=True)
    workflow_name = UnicodeAttribute()
    version = NumberAttribute()
    state = UnicodeAttribute()
    workflow_request_id = UnicodeAttribute()
    input = UnicodeAttribute(null=True)
    error = UnicodeAttribute(null=True)
    source = UnicodeAttribute(null=True)
    created_epoch = NumberAttribute()
    created_day = UnicodeAttribute()
    updated_epoch = NumberAttribute()
    ended_epoch = NumberAttribute(null=True)
    #: Key of the by_name_state index ("<workflow_name>#<state>"), written by the store
    #: with every state change (absent on items written before the index existed, until
    #: their next state change).
    name_state = UnicodeAttribute(null=True)
    check_shard = UnicodeAttribute(null=True)
    check_epoch = NumberAttribute(null=True)
    request_expires_epoch = NumberAttribute(null=True)
    history = ListAttribute(of=HistoryEntry, default=list)
    expires_epoch = NumberAttribute(null=True)
    #: A child run: the parent's activity attempt that started it.
    parent_activity_exec_id = UnicodeAttribute(null=True)
    #: Redrives (engine/redrive.py): how many, the last one's time, and the last one
    #: whose new attempts and edges are all written.
    redrive_count = NumberAttribute(null=True)
    redriven_epoch = NumberAttribute(null=True)
    redrive_ready = NumberAttribute(null=True)
    #: A run ended early (issue 22): the attempt that ended it, and the output it gave.
    ended_by = UnicodeAttribute(null=True)
    output = UnicodeAttribute(null=True)


class ActivityExecModel(Model):
    workflow_exec_id = UnicodeAttribute(hash_key=True)
    activity_exec_id = UnicodeAttribute(range_key=True)
    activity_name = UnicodeAttribute()
    workflow_name = UnicodeAttribute()
    attempt = NumberAttribute()
    #: The definition version its workflow runs (saves reading the workflow item to
    #: find it on every transition). Absent on items written before it existed.
    workflow_version = NumberAttribute(null=True)
    state = UnicodeAttribute()
    launcher = UnicodeAttribute(null=True)
    output = UnicodeAttribute(null=True)
    error = UnicodeAttribute(null=True)
    error_type = UnicodeAttribute(null=True)
    created_epoch = NumberAttribute()
    updated_epoch = NumberAttribute()
    started_epoch = NumberAttribute(null=True)
    ended_epoch = NumberAttribute(null=True)
    heartbeat_epoch = NumberAttribute(null=True)
    heartbeat_timeout_seconds = NumberAttribute(null=True)
    close_epoch = NumberAttribute(null=True)
    not_before_epoch = NumberAttribute(null=True)
    timer_shard = UnicodeAttribute(null=True)
    timer_epoch = NumberAttribute(null=True)
    claim_shard = UnicodeAttribute(null=True)
    claim_key = UnicodeAttribute(null=True)
    worker = UnicodeAttribute(null=True)
    history = ListAttribute(of=HistoryEntry, default=list)
    expires_epoch = NumberAttribute(null=True)
    #: The attempt's own input (JSON): a map item's element, a failure handler's error.
    input = UnicodeAttribute(null=True)
    #: A map's number of items, written when it expands.
    map_size = NumberAttribute(null=True)
    #: A failure handler's attempt: the failed attempt it runs for.
    called_by = UnicodeAttribute(null=True)
    #: The workflow's redrive count when the attempt was created, and the attempts
    #: before that redrive's first (a redrive starts a fresh retry budget).
    redrive_count = NumberAttribute(null=True)
    retry_base = NumberAttribute(null=True)
    #: What a READY wait waits for (``signal:<name>``, ``approval``, ``timer:<time>``).
    waiting_for = UnicodeAttribute(null=True)
    approvers = ListAttribute(of=UnicodeAttribute, null=True)
    #: A deadline held back while the workflow is SUSPENDED (re-armed on resume).
    held_epoch = NumberAttribute(null=True)
    #: Set by the write that completed the attempt with ``end_workflow`` (issue 22).
    ends_workflow = BooleanAttribute(null=True)


class SignalModel(Model):
    """A signal sent to a run before a wait of its name was READY (kept until one is)."""

    workflow_exec_id = UnicodeAttribute(hash_key=True)
    signal_id = UnicodeAttribute(range_key=True)
    signal_name = UnicodeAttribute()
    sent_epoch = NumberAttribute()
    payload = UnicodeAttribute(null=True)
    consumed_by = UnicodeAttribute(null=True)
    expires_epoch = NumberAttribute(null=True)


class DependencyModel(Model):
    dependency_key = UnicodeAttribute(hash_key=True)  # "<workflow_exec_id>/<downstream>"
    upstream = UnicodeAttribute(range_key=True)
    expires_epoch = NumberAttribute(null=True)


class ActivityEventModel(Model):
    activity_event_id = UnicodeAttribute(hash_key=True)
    #: Absent on a row that acts on a whole run (REDRIVE names workflow_exec_id).
    activity_exec_id = UnicodeAttribute(null=True)
    activity_name = UnicodeAttribute(null=True)
    workflow_exec_id = UnicodeAttribute(null=True)
    workflow_name = UnicodeAttribute(null=True)
    transition = UnicodeAttribute()
    output = UnicodeAttribute(null=True)
    error = UnicodeAttribute(null=True)
    source = UnicodeAttribute(null=True)
    when_epoch = NumberAttribute()
    error_type = UnicodeAttribute(null=True)
    expires_epoch = NumberAttribute(null=True)
    # What processing did with the row, written by Whimbrel for its sender to read.
    outcome = UnicodeAttribute(null=True)
    processed_epoch = NumberAttribute(null=True)
    result_state = UnicodeAttribute(null=True)
    reason = UnicodeAttribute(null=True)


class RejectionModel(Model):
    rejection_day = UnicodeAttribute(hash_key=True)
    rejection_id = UnicodeAttribute(range_key=True)
    source = UnicodeAttribute()  # e.g. "workflow_request", "activity_event", "dead_letter"
    reason = UnicodeAttribute()
    error_type = UnicodeAttribute()
    record = UnicodeAttribute()  # the offending item or stream record, as JSON
    when_epoch = NumberAttribute()
    expires_epoch = NumberAttribute(null=True)


class NotificationModel(Model):
    """A published event's marker (written by ``store/notifications.py``)."""

    event_id = UnicodeAttribute(hash_key=True)  # the event's detail.event_id
    detail_type = UnicodeAttribute()
    workflow_exec_id = UnicodeAttribute()
    status = UnicodeAttribute()  # PENDING (claimed), SENT (published)
    attempts = NumberAttribute()  # deliveries that claimed it
    claimed_epoch = NumberAttribute()
    sent_epoch = NumberAttribute(null=True)
    expires_epoch = NumberAttribute()


_BASES: dict[str, type[Model]] = {
    "workflow_definition": WorkflowDefinitionModel,
    "workflow_request": WorkflowRequestModel,
    "workflow_exec": WorkflowExecModel,
    "activity_exec": ActivityExecModel,
    "activity_exec_dependency": DependencyModel,
    "activity_event": ActivityEventModel,
    "rejection": RejectionModel,
    "notification": NotificationModel,
    "signal": SignalModel,
}

_M = TypeVar("_M", bound=Model)


@dataclass(frozen=True)
class BoundModels:
    """Model classes bound to one table prefix and endpoint, plus their indexes."""

    prefix: str
    workflow_definition: type[WorkflowDefinitionModel]
    workflow_request: type[WorkflowRequestModel]
    workflow_exec: type[WorkflowExecModel]
    activity_exec: type[ActivityExecModel]
    dependency: type[DependencyModel]
    activity_event: type[ActivityEventModel]
    rejection: type[RejectionModel]
    notification: type[NotificationModel]
    signal: type[SignalModel]
    indexes: dict[str, GlobalSecondaryIndex[Any]]

    def all(self) -> tuple[type[Model], ...]:
        return (
            self.workflow_definition,
            self.workflow_request,
            self.workflow_exec,
            self.activity_exec,
            self.dependency,
            self.activity_event,
            self.rejection,
            self.notification,
            self.signal,
        )

    def cold(self) -> tuple[type[Model], ...]:
        """The tables the store reaches through PynamoDB (the hot ones use the lean
        client; their models here are their declared schema)."""
        return (self.workflow_definition, self.workflow_request, self.activity_event,
                self.rejection)


def _index(spec: specs.IndexSpec) -> GlobalSecondaryIndex[Any]:
    attrs: dict[str, Any] = {}
    hk, rk = spec.hash_key, spec.range_key
    attrs[hk.name] = (UnicodeAttribute if hk.type == "S" else NumberAttribute)(hash_key=True)
    if rk:
        attrs[rk.name] = (UnicodeAttribute if rk.type == "S" else NumberAttribute)(range_key=True)
    projection: Projection = KeysOnlyProjection()
    if spec.projection == "INCLUDE":
        projection = IncludeProjection(list(spec.non_key_attributes))
    elif spec.projection == "ALL":
        projection = AllProjection()
    meta = type("Meta", (), {"index_name": spec.name, "projection": projection})
    cls = type(f"Index_{spec.name}", (GlobalSecondaryIndex,), {"Meta": meta, **attrs})
    return cls()  # type: ignore[no-any-return]


def _bind(base: type[_M], spec: specs.TableSpec, prefix: str, host: str | None,
          region: str | None, indexes: dict[str, GlobalSecondaryIndex[Any]]) -> type[_M]:
    meta = type(
        "Meta",
        (),
        {
            "table_name": spec.table_name(prefix),
            "host": host,
            "region": region or "us-east-1",
            "max_retry_attempts": 3,
            # A busy process has more threads than 50 on one table's client (activity
            # threads, the engine's I/O and fan-out pools, heartbeats): urllib3 then
            # discarded connections and paid a new TCP connect for each.
            "max_pool_connections": 128,
        },
    )
    namespace: dict[str, Any] = {"Meta": meta}
    for idx_spec in spec.indexes:
        namespace[idx_spec.name] = _index(idx_spec)
    cls = type(f"{base.__name__}_{prefix}", (base,), namespace)
    for idx_spec in spec.indexes:
        # PynamoDB binds a *copy* of each index to the class: keep that copy.
        indexes[f"{spec.logical_name}.{idx_spec.name}"] = getattr(cls, idx_spec.name)
    return cls


def bind_models(prefix: str, *, host: str | None, region: str | None) -> BoundModels:
    """Concrete model classes for tables named ``<prefix><logical name>``."""
    indexes: dict[str, GlobalSecondaryIndex[Any]] = {}
    bound = {
        name: _bind(base, specs.table_spec(name), prefix, host, region, indexes)
        for name, base in _BASES.items()
    }
    return BoundModels(
        prefix=prefix,
        workflow_definition=bound["workflow_definition"],  # type: ignore[arg-type]
        workflow_request=bound["workflow_request"],  # type: ignore[arg-type]
        workflow_exec=bound["workflow_exec"],  # type: ignore[arg-type]
        activity_exec=bound["activity_exec"],  # type: ignore[arg-type]
        dependency=bound["activity_exec_dependency"],  # type: ignore[arg-type]
        activity_event=bound["activity_event"],  # type: ignore[arg-type]
        rejection=bound["rejection"],  # type: ignore[arg-type]
        notification=bound["notification"],  # type: ignore[arg-type]
        signal=bound["signal"],  # type: ignore[arg-type]
        indexes=indexes,
    )
