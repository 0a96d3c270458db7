"""The tables of single features: the notify consumer's markers, kept signals, schedules,
leases and pools. Re-exported by :mod:`whimbrel.store.specs`."""

from __future__ import annotations

from whimbrel.store.spec_types import IndexSpec, Key, TableSpec, attributes

#: How long an event's marker is kept: longer than a stream record can be redelivered
#: (DynamoDB Streams keep records 24 hours).
NOTIFICATION_RETENTION_SECONDS = 2 * 86_400



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
