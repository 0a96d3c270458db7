"""Every table, index and stream Whimbrel uses, described once: ``create_tables()`` and
the CDK construct (``infra/``) read this module; nothing else spells a key or an index
name. Why the keys are what they are: ``docs/architecture.md``; the streams' consumers:
:mod:`whimbrel.store.consumers`."""

from __future__ import annotations

from whimbrel.settings import DEFAULT_TABLE_PREFIX
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

# The vocabulary (spec_types.py) is re-exported: callers read every spec from here.
__all__ = ["ATTR_KINDS", "DEFAULT_TABLE_PREFIX", "TTL_ATTRIBUTE", "AttrKind", "AttrType",
           "IndexSpec", "Key", "Projection", "TableSpec", "attributes",
           "create_table_request"]  # and the specs below

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
#: (``p0``..``p3``): every claim reads them with its window, so every worker sees them
#: and serves them in order, aging included (docs/architecture.md, "Pools").
PRIORITY_CLAIM_SHARDS = 4
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


#: Written by Whimbrel on a Simple API row after processing it.
_OUTCOME = "outcome processed_epoch:N result_state reason"


WORKFLOW_DEFINITION = TableSpec(
    "workflow_definition",
    Key("workflow_name"),
    Key("version", "N"),
    attributes=attributes("workflow_name version:I catalog definition created_epoch:N "
                          "description expires_epoch:N"),
    indexes=(
        IndexSpec(
            "all_names",
            Key("catalog"),
            Key("workflow_name"),
            purpose="every registered (name, version), by name: one Query lists the "
            "workflow names (state-only listings of runs walk them)",
        ),
    ),
    purpose="Registered definitions; a version is immutable once written (TTL is on for "
    "every table, but Whimbrel never sets expires_epoch on a definition).",
)

WORKFLOW_REQUEST = TableSpec(
    "workflow_request",
    Key("workflow_request_id"),
    attributes=attributes("workflow_request_id workflow_name version:I input:J manual:BOOL "
                          "source when_epoch:N workflow_exec_id expires_epoch:N traceparent "
                          "priority:I input_ref attributes:J " + _OUTCOME),
    # Old images too: a row written again under the same id is rejected with what it
    # held before (the content that started the run).
    stream="NEW_AND_OLD_IMAGES",
    purpose="Simple Lambda API: one item starts a workflow (manual=true items are traces).",
)

WORKFLOW_EXEC = TableSpec(
    "workflow_exec",
    Key("workflow_exec_id"),
    attributes=attributes(
        "workflow_exec_id workflow_name version:I state workflow_request_id input:J error "
        "source created_epoch:N created_day updated_epoch:N ended_epoch:N name_state state_key "
        "check_shard check_epoch:N request_expires_epoch:N history:H expires_epoch:N "
        "parent_activity_exec_id redrive_count:I redriven_epoch:N redrive_ready:I roots_ready:N "
        "ended_by ending_by output:J traceparent input_apart:BOOL priority:I pool_slot "
        "forked_from attributes:J properties:J continued_as input_digest"),
    indexes=(
        IndexSpec(
            "by_day",
            Key("created_day"),
            Key("created_epoch", "N"),
            purpose="list recent executions of any workflow without a Scan "
            "(created_day = 'runs#<k>', k one of BY_DAY_SHARDS write shards; the name "
            "is kept from when it held the UTC day, so no index changed)",
        ),
        IndexSpec(
            "by_name_state",
            Key("name_state"),
            Key("created_epoch", "N"),
            purpose="list executions of one workflow in one state, newest first "
            "(name_state = '<workflow_name>#<state>#<k>', k one of NAME_STATE_SHARDS "
            "write shards fixed per run, written with every state change)",
        ),
        IndexSpec(
            "by_state",
            Key("state_key"),
            Key("created_epoch", "N"),
            purpose="list executions in one state whatever their workflow, newest first "
            "(state_key = '<state>#<k>', k one of STATE_SHARDS write shards fixed per run, "
            "written with every state change): a page costs the same however many "
            "names are registered",
        ),
        IndexSpec(
            "reconcile",
            Key("check_shard"),
            Key("check_epoch", "N"),
            purpose="sparse: present only while the execution is not terminal; "
            "the reconciler visits executions whose check time has passed",
        ),
    ),
    # For the notify consumer (workflow ends); old images let its filter pass only the
    # write that ended the run. A stream costs no write capacity.
    stream="NEW_AND_OLD_IMAGES",
    purpose="One item per workflow execution: its state, small enough that a guard's "
    "consistent read of it is one read unit (a large input is kept in workflow_exec_data).",
)

WORKFLOW_EXEC_DATA = TableSpec(
    "workflow_exec_data",
    Key("workflow_exec_id"),
    Key("part"),
    attributes=attributes("workflow_exec_id part input:J expires_epoch:N"),
    purpose="A run's large attributes, apart from its state item (which says "
    "input_apart = true): part 'input' holds an input of more than INLINE_INPUT_BYTES. "
    "Read where it is needed (an activity's input, the map over the input, the run's "
    "status), once per process; it expires with its run.",
)

_ACTIVITY_ATTRIBUTES = (
    "workflow_exec_id activity_exec_id activity_name workflow_name attempt:I "
    "workflow_version:I state output:J error error_type created_epoch:N "
    "updated_epoch:N started_epoch:N ended_epoch:N heartbeat_epoch:N "
    "heartbeat_timeout_seconds:N close_epoch:N deadline_epoch:N not_before_epoch:N "
    "timer_shard "
    "timer_epoch:N claim_shard claim_key worker history:H expires_epoch:N input:J "
    "map_size:I called_by redrive_count:I retry_base:I waiting_for approvers:SL "
    "held_epoch:N child_workflow_exec_id late_output:J late_error late_epoch:N "
    "retry_created:I ends_workflow:BOOL traceparent pool_slot pool_wait ready_epoch:N step "
    "heartbeat_details:J")

#: The sparse indexes of attempts, alike on ``activity_exec`` and ``map_item`` (a sweep
#: and a claim read both tables' shards).
_ATTEMPT_INDEXES = (
    IndexSpec(
        "timers",
        Key("timer_shard"),
        Key("timer_epoch", "N"),
        purpose="sparse: present only while a deadline is armed (heartbeat of a "
        "running activity, or the not-before time of a retry); a heartbeat moves "
        "only deadline_epoch, never this entry: the sweep re-arms it when it finds "
        "the real deadline later than the armed one",
    ),
    IndexSpec(
        "claimable",
        Key("claim_shard"),
        Key("claim_key"),
        projection="INCLUDE",
        # What a claimer needs to write READY -> RUNNING without reading the item
        # first (one round trip less per pulled activity; the move stays conditional).
        non_key_attributes=("state", "activity_name", "workflow_name", "workflow_version",
                            "attempt", "heartbeat_timeout_seconds"),
        purpose="sparse: present only while an external activity is READY to be claimed",
    ),
)

ACTIVITY_EXEC = TableSpec(
    "activity_exec",
    Key("workflow_exec_id"),
    Key("activity_exec_id"),
    attributes=attributes(_ACTIVITY_ATTRIBUTES),
    indexes=_ATTEMPT_INDEXES,
    # For the notify consumer (failures for good, waits that start), as above.
    stream="NEW_AND_OLD_IMAGES",
    purpose="One item per activity attempt, in its workflow's partition (a map's items "
    "are in map_item).",
)

MAP_ITEM = TableSpec(
    "map_item",
    Key("item_partition"),
    Key("activity_exec_id"),
    attributes=attributes(_ACTIVITY_ATTRIBUTES + " item_partition"),
    indexes=_ATTEMPT_INDEXES,
    stream="NEW_AND_OLD_IMAGES",
    purpose="One item per attempt of a map's item (<wx>:<map>#<i>:<attempt>), the same "
    "attributes as activity_exec, in partitions of their own: item_partition = "
    "'<wx>/<map>/<i mod MAP_ITEM_PARTITIONS>', so one run's wide map is not one "
    "partition and an item's place follows from its id.",
)

ACTIVITY_EXEC_DEPENDENCY = TableSpec(
    "activity_exec_dependency",
    Key("dependency_key"),
    Key("upstream"),
    attributes=attributes("dependency_key upstream expires_epoch:N"),
    purpose="Pending fan-in edges; an edge is deleted when its upstream completes.",
)

ACTIVITY_EVENT = TableSpec(
    "activity_event",
    Key("activity_event_id"),
    attributes=attributes("activity_event_id activity_exec_id activity_name workflow_exec_id "
                          "workflow_name transition output:J error:J source when_epoch:N "
                          "error_type expires_epoch:N traceparent output_ref " + _OUTCOME),
    stream="NEW_AND_OLD_IMAGES",
    purpose="Simple Lambda API: one item reports one activity transition.",
)

REJECTION = TableSpec(
    "rejection",
    Key("rejection_day"),
    Key("rejection_id"),
    attributes=attributes("rejection_day rejection_id source reason error_type record "
                          "when_epoch:N expires_epoch:N"),
    purpose="Records that can never succeed, with the reason; listed by `whimbrel rejections`.",
)

NOTIFICATION = TableSpec(
    "notification",
    Key("event_id"),
    attributes=attributes("event_id detail_type workflow_exec_id status attempts:I "
                          "claimed_epoch:N sent_epoch:N expires_epoch:N"),
    purpose="One marker per event the notify consumer publishes, created (attribute_not_"
    "exists) before the event is sent and marked sent after: a redelivered stream record "
    "publishes nothing twice. Expires NOTIFICATION_RETENTION_SECONDS after it was written.",
)

SIGNAL = TableSpec(
    "signal",
    Key("workflow_exec_id"),
    Key("signal_id"),
    attributes=attributes("workflow_exec_id signal_id signal_name sent_epoch:N payload:J "
                          "consumed_by expires_epoch:N"),
    purpose="Signals sent to a run before a wait of their name was READY, kept until one "
    "is (a run's signals are one Query of its partition); a signal_id names one signal.",
)

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

LEASE = TableSpec(
    "lease",
    Key("lease_id"),
    attributes=attributes("lease_id owner host pid:I acquired_epoch:N until_epoch:N "
                          "endpoint expires_epoch:N"),
    purpose="Leases that divide work between processes: 'sweep#<k>' (SWEEP_LEASES of them) "
    "gives one sweeper shard k of every sparse index (timers, reconcile, due_schedules: "
    "index shard j belongs to lease j % SWEEP_LEASES) for one pass; 'dev' is held by the "
    "one `whimbrel dev` that pumps this prefix's streams. Taken with a conditional write "
    "when absent, expired (until_epoch passed) or already the taker's; renewed while "
    "held; deleted at the end. Leases divide work, they do not guard it: every move stays "
    "a conditional write, so two holders (clocks apart) only waste reads.",
)

POOL = TableSpec(
    "pool",
    Key("pool_key"),
    Key("entry"),
    attributes=attributes(
        "pool_key entry pool_name slots:I slots_high:I per_second:N catalog created_epoch:N "
        "updated_epoch:N holder token since:N check_shard check_epoch:N tokens:N "
        "refilled_at:N kind expires_epoch:N"),
    indexes=(
        IndexSpec(
            "pool_names",
            Key("catalog"),
            Key("pool_name"),
            projection="INCLUDE",
            non_key_attributes=("slots", "slots_high", "per_second", "created_epoch",
                                "updated_epoch"),
            purpose="sparse: the settings item of every pool (Whimbrel.set_pool), by name: "
            "list_pools is one Query",
        ),
        IndexSpec(
            "pool_checks",
            Key("check_shard"),
            Key("check_epoch", "N"),
            purpose="sparse: present only while a slot is held; the sweep frees a slot "
            "whose holder ended or died without releasing it (check_shard: one of "
            "POOL_CHECK_SHARDS, a hash of the slot's key)",
        ),
    ),
    purpose="Pools (issue 22; docs/architecture.md, \"Pools\"): a pool's settings "
    "('pool#<name>', 'settings'), one item per slot ('pool#<name>#<k>', 'slot'; held while "
    "'holder' is set), its rate's token buckets ('pool#<name>#rate#<j>', 'rate') and "
    "its waiters ('wait#<name>#<shard>', '<order>#<holder>'). The implicit pool of a "
    "definition's max_running is 'run:<workflow_name>'.",
)

WORKFLOW_ATTRIBUTE = TableSpec(
    "workflow_attribute",
    Key("workflow_exec_id"),
    Key("attribute"),
    attributes=attributes("workflow_exec_id attribute attr_key created_epoch:N "
                          "workflow_name expires_epoch:N"),
    indexes=(
        IndexSpec(
            "by_attribute",
            Key("attr_key"),
            Key("created_epoch", "N"),
            purpose="runs by one of their attributes, newest first: '<name>=<s|n>:<value>"
            "#<k>', k of ATTRIBUTE_SHARDS by execution id, so a value a million runs "
            "share is spread like by_day; a listing reads every shard and merges",
        ),
    ),
    purpose="A run's attributes (start_workflow(attributes=...)), one item each, written "
    "before the run's item (an entry of a run that never started is dropped by the "
    "listing, which checks the run's own attributes); expires with the run's retention.",
)

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

#: How long an event's marker is kept: longer than a stream record can be redelivered
#: (DynamoDB Streams keep records 24 hours).
NOTIFICATION_RETENTION_SECONDS = 2 * 86_400


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


def table_spec(logical_name: str) -> TableSpec:
    for spec in TABLES:
        if spec.logical_name == logical_name:
            return spec
    raise KeyError(logical_name)
