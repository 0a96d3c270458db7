"""The tables of runs: definitions, the run's state item, its large input apart, and its
attributes. Re-exported by :mod:`whimbrel.store.specs`."""

from __future__ import annotations

from whimbrel.store.spec_types import IndexSpec, Key, TableSpec, attributes

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

WORKFLOW_EXEC = TableSpec(
    "workflow_exec",
    Key("workflow_exec_id"),
    attributes=attributes(
        "workflow_exec_id workflow_name version:I state workflow_request_id input:J error "
        "source created_epoch:N created_day updated_epoch:N ended_epoch:N name_state state_key "
        "check_shard check_epoch:N request_expires_epoch:N history:H expires_epoch:N "
        "parent_activity_exec_id redrive_count:I redriven_epoch:N redrive_ready:I roots_ready:N "
        "ended_by ending_by output:J traceparent input_apart:BOOL priority:I pool_slot "
        "forked_from attributes:J properties:J continued_as input_digest code_seed "
        "code_epoch:N"),
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
