"""The tables of attempts: an activity's attempts in its run's partition, a map's items
in partitions of their own (the same attributes and sparse indexes), and the pending
fan-in edges. Re-exported by :mod:`whimbrel.store.specs`."""

from __future__ import annotations

from whimbrel.store.spec_types import IndexSpec, Key, TableSpec, attributes

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
