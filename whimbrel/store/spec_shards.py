"""How the tables' keys are spread and spelled: the write shards of every index whose
natural key many items share, the partitions of a map's items, the catalog values, and
the functions that spell a sharded key. Part of the schema (changing a count moves
items; see each). Re-exported by :mod:`whimbrel.store.specs`."""

from __future__ import annotations

#: Write shards of every index (and of ``rejection``) whose natural key many items
#: share: an item's entry lands on ``<natural key>#<k>`` (or, for the sparse indexes,
#: on shard ``k``), ``k = shard_of(item id, N)``; a read fans out over the N shards and
#: merges by sort key. AWS serves 1,000 WCU/s per key value, an on-demand table 40,000
#: WCU/s by default: 32 shards let each index take 32,000 WCU/s, more than its share of
#: the table quota (1 or 2 index units per start or activity against ~10 to 20 table units),
#: and keep the hottest shard near 1/32 of its index (docs/architecture.md, "Scale").
#: Raising a count later is safe for the sparse indexes (their shards are "0".."N-1",
#: a superset); for ``by_day``, ``by_name_state`` and ``rejection`` it needs
#: ``whimbrel tables migrate`` (docs/deploy.md).
BY_DAY_SHARDS = 32
STATE_SHARDS = 32
ATTRIBUTE_SHARDS = 32
NAME_STATE_SHARDS = 32
TIMER_SHARDS = 32
RECONCILE_SHARDS = 32
CLAIM_SHARDS = 32
#: Shards of the ``claimable`` index for attempts whose priority is not the default
#: (``p0``..``p7``): a claim reads a window of them (engine/claims.py,
#: ``PRIORITY_WINDOW``), a process's consecutive claims in turn, so no key is read by
#: every claim and any ``PRIORITY_CLAIM_SHARDS / PRIORITY_WINDOW`` claims of a process
#: read them all (docs/architecture.md, "Priority in claims"). Raising it is safe: the
#: old shards are among the new.
PRIORITY_CLAIM_SHARDS = 8
REJECTION_SHARDS = 16
#: Partitions of the sparse ``due_schedules`` index; a sweep queries them in parallel.
SCHEDULE_SHARDS = 4
#: Sweep leases (``lease`` table, ``sweep#<k>``): shard j of a sparse index the sweep
#: reads (timers, reconcile, due_schedules) is swept by the holder of lease
#: ``j % SWEEP_LEASES``, so up to this many sweepers divide a pass between them.
SWEEP_LEASES = 32
#: The lease of the one ``whimbrel dev`` that pumps a prefix's streams.
DEV_LEASE_ID = "dev"
#: Partitions of a map's items: item ``i`` of map ``m`` of run ``wx`` (each attempt) is
#: under ``<wx>/<m>/<i mod MAP_ITEM_PARTITIONS>``; 16 keys at ~3 WCU an item take ~5,300
#: items/s (docs/architecture.md, "Maps"). Part of the schema: changing it moves items.
MAP_ITEM_PARTITIONS = 16
#: Shards of ``map_item``'s ``timers`` and ``claimable``: 8 keys, ~4,000 items/s at 2 WCU
#: an item (one map's target is 3,000/s), and 8 shards for each sweep or claim to read.
MAP_ITEM_INDEX_SHARDS = 8
#: A run's input larger than this (bytes of JSON) is kept apart, in ``workflow_exec_data``,
#: so the run's item that every guard reads stays within 1 RCU (4 KB, strongly consistent).
INLINE_INPUT_BYTES = 1024
#: Partitions of the sparse ``pool_checks`` index (held pool slots, swept when due): 2
#: units an admission, so 16 keys carry 8,000 admissions/s (docs/architecture.md, "Pools").
POOL_CHECK_SHARDS = 16
#: Copies of a name's latest version number in ``workflow_definition`` (engine/latest.py):
#: a start reads one at random, 16 keys for 48,000 starts/s of one definition, not 3,000.
LATEST_COPIES = 16
#: The one value of a pool's ``catalog`` attribute (its settings item): every pool is in
#: the ``pool_names`` index, so ``list_pools`` is one Query.
POOL_CATALOG = "pools"
#: The one value of a definition's ``catalog`` attribute: every definition item is in
#: the ``all_names`` index, so the registered names are one Query away (never a Scan).
CATALOG = "definitions"



def name_state_key(workflow_name: str, state: str, shard: int | str | None = None) -> str:
    """The ``by_name_state`` hash key of an execution of ``workflow_name`` in ``state``
    on write shard ``shard`` (None: the natural key, unsharded, as before issue 19)."""
    natural = f"{workflow_name}#{state}"
    return natural if shard is None else f"{natural}#{shard}"


def state_key(state: str, shard: int | str) -> str:
    """The ``by_state`` hash key of an execution in ``state`` on write shard ``shard``."""
    return f"{state}#{shard}"


def day_key(day: str, shard: int | str | None) -> str:
    """The ``rejection`` hash key of ``day`` on write shard ``shard``."""
    return day if shard is None else f"{day}#{shard}"


def by_day_key(shard: int | str) -> str:
    """The ``by_day`` hash key (``created_day``) of write shard ``shard``: runs of every
    day, ordered by ``created_epoch``; a time window is one Query per shard, however
    many days it spans (a value before issue 19 was the UTC day, ``YYYY-MM-DD``)."""
    return f"runs#{shard}"


def attribute_key(name: str, value_text: str, shard: int | str) -> str:
    """The ``by_attribute`` hash key of attribute ``name`` = ``value_text`` (as
    ``contract.attributes.value_text`` spells it) on write shard ``shard``."""
    return f"{name}={value_text}#{shard}"


def sweep_lease_id(shard: int) -> str:
    """The lease whose holder sweeps shard ``shard`` of every sparse index."""
    return f"sweep#{shard % SWEEP_LEASES}"


def map_item_key(workflow_exec_id: str, map_name: str, partition: int | str) -> str:
    """The ``map_item`` hash key of partition ``partition`` of a run's map."""
    return f"{workflow_exec_id}/{map_name}/{partition}"
