"""Who may touch which table: the engine functions and the two exported policies.

Every permission goes through a ``grant*`` method of the table, so table ARNs, index
ARNs and (with a customer-managed key) the KMS permissions come from CDK, and no
statement ever carries ``dynamodb:*``.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from whimbrel.store.specs import (
    ACTIVITY_EVENT,
    ACTIVITY_EXEC,
    ACTIVITY_EXEC_DEPENDENCY,
    LEASE,
    MAP_ITEM,
    NOTIFICATION,
    POOL,
    REJECTION,
    SCHEDULE,
    SIGNAL,
    WORKFLOW_ATTRIBUTE,
    WORKFLOW_DEFINITION,
    WORKFLOW_EXEC,
    WORKFLOW_EXEC_DATA,
    WORKFLOW_REQUEST,
    table_spec,
)

# Deployment concern, kept here: which tables the engine code reads and writes (from
# whimbrel/store/store.py as the engine uses it). The three handlers all run the
# engine's transition + follow-up + reconcile paths (a stream record can complete an
# activity, which readies dependents, which finishes the workflow — or starts a child
# workflow: its workflow item, activity rows and edges, never a request row), so they
# share one set. Stream records arrive through the event source mappings, which grant the stream
# reads themselves; the engine never reads or writes request or event items.
ENGINE_READS = (WORKFLOW_DEFINITION.logical_name,)
ENGINE_WRITES = (
    WORKFLOW_EXEC.logical_name,
    ACTIVITY_EXEC.logical_name,
    ACTIVITY_EXEC_DEPENDENCY.logical_name,
    REJECTION.logical_name,
    SIGNAL.logical_name,  # signals kept for a wait (SIGNAL rows, reconcile)
    SCHEDULE.logical_name,  # schedules the sweep fires (engine/schedules.py)
    LEASE.logical_name,  # the sweep's shard leases (engine/leases.py)
    POOL.logical_name,  # pool slots, rates and waiters (engine/pools.py)
)
# Tables the engine uses with a few item operations only, granted just those (the
# functions' roles keep one inline policy, under IAM's size limit): a run's large input,
# kept apart from its item, a map's items, in partitions of their own, and a run's
# attributes.
ENGINE_ITEM_ACTIONS = {
    WORKFLOW_EXEC_DATA.logical_name: ("dynamodb:GetItem", "dynamodb:PutItem",
                                      "dynamodb:UpdateItem"),
    MAP_ITEM.logical_name: ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
                            "dynamodb:Query"),
    # A run's attributes, written at its start (a request row's, a child's); listing
    # them is a client's (console, CLI) read.
    WORKFLOW_ATTRIBUTE.logical_name: ("dynamodb:BatchWriteItem",),
}
# The sweep asks each sparse index which of its shards have something due in one PartiQL
# SELECT with IN on the shard key (whimbrel/store/plumbing.py, select_in: a Query of
# each key, never a Scan), and a claim reads its shards of `claimable` so.
PARTIQL_SELECT = "dynamodb:PartiQLSelect"
ENGINE_PARTIQL = (WORKFLOW_EXEC.logical_name, ACTIVITY_EXEC.logical_name,
                  MAP_ITEM.logical_name, SCHEDULE.logical_name, POOL.logical_name)

# The notify function (whimbrel/observe/notify.py) reads executions and definitions (a
# retry policy, a completed run's sink outputs), claims and marks its event markers, and
# logs the records it cannot use as rejections. It changes no execution.
NOTIFY_READS = (
    WORKFLOW_DEFINITION.logical_name,
    WORKFLOW_EXEC.logical_name,
    ACTIVITY_EXEC.logical_name,
)
#: A map's output kept on its items, and an attempt of an item (notify_map_item).
NOTIFY_ITEM_READS = (MAP_ITEM.logical_name, ("dynamodb:GetItem", "dynamodb:Query"))
NOTIFY_MARKERS = NOTIFICATION.logical_name
NOTIFY_PUT = REJECTION.logical_name

# An activity worker on the Simple Lambda API (docs/contract.md): it reports transitions
# by putting one activity_event item, heartbeats its activity_exec (or, for a map's
# item, map_item) item with a conditional UpdateItem, and reads the execution items it
# works on (its own attempt, whether the run was cancelled, the run's input when it is
# kept apart).
WORKER_PUT_EVENT = ("dynamodb:PutItem",)
WORKER_ACTIVITY_EXEC = (
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:UpdateItem",
    PARTIQL_SELECT,  # a claim's read of its claimable shards
)
WORKER_READ = ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query")


def grant_partiql_select(grantee: iam.IGrantable,
                         tables: Mapping[str, dynamodb.Table]) -> None:
    """``PartiQLSelect`` on the indexes of ``ENGINE_PARTIQL``, in one statement (the
    function roles keep one inline policy, under IAM's size limit)."""
    grantee.grant_principal.add_to_principal_policy(iam.PolicyStatement(
        actions=[PARTIQL_SELECT],
        resources=[f"{tables[name].table_arn}/index/*" for name in ENGINE_PARTIQL]))


#: What ``Table.grant_read_data`` / ``grant_read_write_data`` allow (aws-cdk-lib's
#: ``perms.ts``), granted here in one statement for many tables.
READ_ACTIONS = ("dynamodb:BatchGetItem", "dynamodb:GetRecords", "dynamodb:GetShardIterator",
                "dynamodb:Query", "dynamodb:GetItem", "dynamodb:Scan",
                "dynamodb:ConditionCheckItem", "dynamodb:DescribeTable")
WRITE_ACTIONS = ("dynamodb:BatchWriteItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
                 "dynamodb:DeleteItem")


def _arns(tables: Mapping[str, dynamodb.Table], names: tuple[str, ...]) -> list[str]:
    """The tables' ARNs and, for a table with indexes, its indexes' (as CDK's grants)."""
    return [arn for name in names for arn in (
        (tables[name].table_arn, f"{tables[name].table_arn}/index/*")
        if table_spec(name).indexes else (tables[name].table_arn,))]


def grant_engine_access(grantee: iam.IGrantable, tables: Mapping[str, dynamodb.Table], *,
                        sweeps: bool = False) -> None:
    """What one engine function (stream handler or heartbeat) needs on the tables; the
    heartbeat (``sweeps``) also asks the sweep's indexes in one request each. One
    statement per kind of access, not one per table: each function's role keeps one
    inline policy, under IAM's size limit, however many tables the engine uses."""
    principal = grantee.grant_principal
    principal.add_to_principal_policy(iam.PolicyStatement(
        actions=list(READ_ACTIONS), resources=_arns(tables, ENGINE_READS)))
    principal.add_to_principal_policy(iam.PolicyStatement(
        actions=[*READ_ACTIONS, *WRITE_ACTIONS], resources=_arns(tables, ENGINE_WRITES)))
    for name, actions in ENGINE_ITEM_ACTIONS.items():
        tables[name].grant(grantee, *actions)
    keys = {id(t.encryption_key): t.encryption_key
            for n in (*ENGINE_READS, *ENGINE_WRITES, *ENGINE_ITEM_ACTIONS)
            if (t := tables[n]).encryption_key is not None}
    for key in keys.values():  # (one customer-managed key for every table, if any)
        key.grant_encrypt_decrypt(grantee)
    if sweeps:
        grant_partiql_select(grantee, tables)


#: Given the user's workflow code, the engine functions register its code workflows at
#: cold start (lambdas/_shared.py): a new version's item and the latest-version copies
#: (whimbrel/store/cold.py: a conditional PutItem, UpdateItems), nothing else there.
REGISTER_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem")


def grant_registering(grantee: iam.IGrantable, tables: Mapping[str, dynamodb.Table]) -> None:
    """Let an engine function given workflow code register its code workflows."""
    tables[WORKFLOW_DEFINITION.logical_name].grant(grantee, *REGISTER_ACTIONS)


def grant_notify_access(grantee: iam.IGrantable, tables: Mapping[str, dynamodb.Table]) -> None:
    """What the notify function needs on the tables (see the constants above)."""
    for name in NOTIFY_READS:
        tables[name].grant_read_data(grantee)
    tables[NOTIFY_ITEM_READS[0]].grant(grantee, *NOTIFY_ITEM_READS[1])
    tables[NOTIFY_MARKERS].grant_read_write_data(grantee)
    tables[NOTIFY_PUT].grant_write_data(grantee)


def grant_activity_worker(grantee: iam.IGrantable, tables: Mapping[str, dynamodb.Table]) -> None:
    """What a process that runs activities needs (see the constants above)."""
    tables[ACTIVITY_EVENT.logical_name].grant(grantee, *WORKER_PUT_EVENT)
    tables[ACTIVITY_EXEC.logical_name].grant(grantee, *WORKER_ACTIVITY_EXEC)
    tables[MAP_ITEM.logical_name].grant(grantee, *WORKER_ACTIVITY_EXEC)
    tables[WORKFLOW_EXEC.logical_name].grant(grantee, *WORKER_READ)
    tables[WORKFLOW_EXEC_DATA.logical_name].grant(grantee, *WORKER_READ)
    # Table.grant covers the table only; with a customer-managed key the worker also
    # needs the key, as the purpose-specific grant_*_data methods would add for writes.
    key = tables[ACTIVITY_EVENT.logical_name].encryption_key
    if key is not None:
        key.grant_encrypt_decrypt(grantee)


def grant_full_logic_client(grantee: iam.IGrantable, tables: Mapping[str, dynamodb.Table]) -> None:
    """What a process that runs the engine in-process needs: every table, no streams."""
    for table in tables.values():
        table.grant_read_write_data(grantee)
    grant_partiql_select(grantee, tables)


def grant_start_workflow(grantee: iam.IGrantable, tables: Mapping[str, dynamodb.Table]) -> None:
    """Simple Lambda API: start a workflow by putting one ``workflow_request`` item."""
    tables[WORKFLOW_REQUEST.logical_name].grant(grantee, "dynamodb:PutItem")


def activity_worker_policy(
    scope: Construct, prefix: str, tables: Mapping[str, dynamodb.Table]
) -> iam.ManagedPolicy:
    """A managed policy to attach to the IAM role of anything that runs activities."""
    policy = iam.ManagedPolicy(
        scope,
        "ActivityWorkerPolicy",
        managed_policy_name=f"{prefix}activity_worker",
        description="Whimbrel activity workers: report activity events, heartbeat "
        "activity executions, read activity and workflow executions.",
    )
    grant_activity_worker(policy, tables)
    return policy


def full_logic_client_policy(
    scope: Construct, prefix: str, tables: Mapping[str, dynamodb.Table]
) -> iam.ManagedPolicy:
    """A managed policy to attach to the IAM role of a Full Logic API client."""
    policy = iam.ManagedPolicy(
        scope,
        "FullLogicClientPolicy",
        managed_policy_name=f"{prefix}full_logic_client",
        description="Whimbrel Full Logic API clients: run the engine in-process "
        "(read and write every Whimbrel table).",
    )
    grant_full_logic_client(policy, tables)
    return policy
