"""Every table, index and stream Whimbrel uses, described once: ``create_tables()`` and
the CDK construct (``infra/``) read this module; nothing else spells a key or an index
name. Why the keys are what they are: ``docs/architecture.md``; the streams' consumers:
:mod:`whimbrel.store.consumers`.

The descriptions are split by what they describe: the vocabulary (``spec_types.py``),
how keys are spread and spelled (``spec_shards.py``), the tables of runs
(``spec_runs.py``), of attempts (``spec_attempts.py``), of the Simple API's rows
(``spec_rows.py``) and of single features (``spec_features.py``). This module gathers
them: callers read every spec from here, and :data:`TABLES` lists every table once.
"""

from __future__ import annotations

from whimbrel.settings import DEFAULT_TABLE_PREFIX
from whimbrel.store.spec_attempts import (
    ACTIVITY_EXEC,
    ACTIVITY_EXEC_DEPENDENCY,
    MAP_ITEM,
)
from whimbrel.store.spec_features import (
    LEASE,
    NOTIFICATION,
    NOTIFICATION_RETENTION_SECONDS,
    POOL,
    SCHEDULE,
    SIGNAL,
)
from whimbrel.store.spec_rows import (
    ACTIVITY_EVENT,
    REJECTION,
    WORKFLOW_REQUEST,
)
from whimbrel.store.spec_runs import (
    WORKFLOW_ATTRIBUTE,
    WORKFLOW_DEFINITION,
    WORKFLOW_EXEC,
    WORKFLOW_EXEC_DATA,
)
from whimbrel.store.spec_shards import (
    ATTRIBUTE_SHARDS,
    BY_DAY_SHARDS,
    CATALOG,
    CLAIM_SHARDS,
    DEV_LEASE_ID,
    INLINE_INPUT_BYTES,
    LATEST_COPIES,
    MAP_ITEM_INDEX_SHARDS,
    MAP_ITEM_PARTITIONS,
    NAME_STATE_SHARDS,
    POOL_CATALOG,
    POOL_CHECK_SHARDS,
    PRIORITY_CLAIM_SHARDS,
    RECONCILE_SHARDS,
    REJECTION_SHARDS,
    SCHEDULE_SHARDS,
    STATE_SHARDS,
    SWEEP_LEASES,
    TIMER_SHARDS,
    attribute_key,
    by_day_key,
    day_key,
    map_item_key,
    name_state_key,
    state_key,
    sweep_lease_id,
)
from whimbrel.store.spec_types import (
    ATTR_KINDS,
    TTL_ATTRIBUTE,
    AttrKind,
    AttrType,
    IndexSpec,
    Key,
    Projection,
    TableSpec,
    attributes,
    create_table_request,
)

__all__ = [
    "ACTIVITY_EVENT",
    "ACTIVITY_EXEC",
    "ACTIVITY_EXEC_DEPENDENCY",
    "ATTRIBUTE_SHARDS",
    "ATTR_KINDS",
    "AttrKind",
    "AttrType",
    "BY_DAY_SHARDS",
    "CATALOG",
    "CLAIM_SHARDS",
    "DEFAULT_TABLE_PREFIX",
    "DEV_LEASE_ID",
    "INLINE_INPUT_BYTES",
    "IndexSpec",
    "Key",
    "LATEST_COPIES",
    "LEASE",
    "MAP_ITEM",
    "MAP_ITEM_INDEX_SHARDS",
    "MAP_ITEM_PARTITIONS",
    "NAME_STATE_SHARDS",
    "NOTIFICATION",
    "NOTIFICATION_RETENTION_SECONDS",
    "POOL",
    "POOL_CATALOG",
    "POOL_CHECK_SHARDS",
    "PRIORITY_CLAIM_SHARDS",
    "Projection",
    "RECONCILE_SHARDS",
    "REJECTION",
    "REJECTION_SHARDS",
    "SCHEDULE",
    "SCHEDULE_SHARDS",
    "SIGNAL",
    "STATE_SHARDS",
    "SWEEP_LEASES",
    "TABLES",
    "TIMER_SHARDS",
    "TTL_ATTRIBUTE",
    "TableSpec",
    "WORKFLOW_ATTRIBUTE",
    "WORKFLOW_DEFINITION",
    "WORKFLOW_EXEC",
    "WORKFLOW_EXEC_DATA",
    "WORKFLOW_REQUEST",
    "attribute_key",
    "attributes",
    "by_day_key",
    "create_table_request",
    "day_key",
    "map_item_key",
    "name_state_key",
    "state_key",
    "sweep_lease_id",
    "table_spec",
]

TABLES: tuple[TableSpec, ...] = (
    WORKFLOW_DEFINITION,
    WORKFLOW_REQUEST,
    WORKFLOW_EXEC,
    WORKFLOW_ATTRIBUTE,
    WORKFLOW_EXEC_DATA,
    ACTIVITY_EXEC,
    MAP_ITEM,
    ACTIVITY_EXEC_DEPENDENCY,
    ACTIVITY_EVENT,
    REJECTION,
    NOTIFICATION,
    SIGNAL,
    SCHEDULE,
    LEASE,
    POOL,
)

def table_spec(logical_name: str) -> TableSpec:
    for spec in TABLES:
        if spec.logical_name == logical_name:
            return spec
    raise KeyError(logical_name)
