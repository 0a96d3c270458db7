"""The vocabulary of the table descriptions and the core's tables, gathered for the
store's own modules: how keys are spread and spelled (``spec_shards.py``), the tables of
runs (``spec_runs.py``), of attempts (``spec_attempts.py``) and of the Simple API's rows
(``spec_rows.py``), over the vocabulary (``spec_types.py``).

A feature's table is not here: its store part declares it (``Part.TABLES``,
:mod:`whimbrel.store.part`), so a part imports this module and nothing imports the parts
back. Every table, the core's and the parts', is listed once in
:data:`whimbrel.store.specs.TABLES`, which callers outside the store read.
"""

from __future__ import annotations

from whimbrel.settings import DEFAULT_TABLE_PREFIX
from whimbrel.store.spec_attempts import (
    ACTIVITY_EXEC,
    ACTIVITY_EXEC_DEPENDENCY,
    MAP_ITEM,
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
    "CORE_TABLES",
    "DEFAULT_TABLE_PREFIX",
    "DEV_LEASE_ID",
    "INLINE_INPUT_BYTES",
    "IndexSpec",
    "Key",
    "LATEST_COPIES",
    "MAP_ITEM",
    "MAP_ITEM_INDEX_SHARDS",
    "MAP_ITEM_PARTITIONS",
    "NAME_STATE_SHARDS",
    "POOL_CATALOG",
    "POOL_CHECK_SHARDS",
    "PRIORITY_CLAIM_SHARDS",
    "Projection",
    "RECONCILE_SHARDS",
    "REJECTION",
    "REJECTION_SHARDS",
    "SCHEDULE_SHARDS",
    "STATE_SHARDS",
    "SWEEP_LEASES",
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
]

#: The core's tables (runs, attempts, edges, definitions, the Simple API's rows), in the
#: order they are created; the parts' tables follow them in ``specs.TABLES``.
CORE_TABLES: tuple[TableSpec, ...] = (
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
)
