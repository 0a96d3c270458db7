"""Upgrade (issue 19, item 6): tables written before the listing keys were write-sharded
keep working, and ``whimbrel tables migrate`` moves their runs onto the new keys."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState as A
from whimbrel import Whimbrel, WorkflowDefinition, WorkflowState
from whimbrel.contract.errors import StoreError
from whimbrel.store import specs
from whimbrel.store.migrate import migrate_index_keys
from whimbrel.testing import StepClock

CLOCK = StepClock


def _old_shape(wb: Whimbrel, wx: str) -> None:
    """Give a run (and its attempts) the keys the code before issue 19 wrote: the UTC
    day, ``<name>#<state>``, and sparse-index shards among "0".."3"."""
    client = wb.store.botocore
    table = wb.store.table_name("workflow_exec")
    item = client.get_item(TableName=table, Key={"workflow_exec_id": {"S": wx}})["Item"]
    day = datetime.fromtimestamp(float(item["created_epoch"]["N"]), UTC).strftime("%Y-%m-%d")
    client.update_item(
        TableName=table, Key={"workflow_exec_id": {"S": wx}},
        UpdateExpression="SET created_day = :d, name_state = :n",
        ExpressionAttributeValues={":d": {"S": day}, ":n": {"S": "{}#{}".format(
            item["workflow_name"]["S"], item["state"]["S"])}})
    acts = wb.store.botocore.query(
        TableName=wb.store.table_name("activity_exec"),
        KeyConditionExpression="workflow_exec_id = :w",
        ExpressionAttributeValues={":w": {"S": wx}})["Items"]
    for act in acts:
        for attr in ("timer_shard", "claim_shard"):
            if attr in act:
                client.update_item(
                    TableName=wb.store.table_name("activity_exec"),
                    Key={"workflow_exec_id": {"S": wx},
                         "activity_exec_id": act["activity_exec_id"]},
                    UpdateExpression=f"SET {attr} = :s",
                    ExpressionAttributeValues={":s": {"S": str(int(act[attr]["S"]) % 4)}})


def test_old_runs_keep_running_and_migrate_onto_the_sharded_keys(
        wb: Whimbrel, clock: StepClock) -> None:
    wb.register_workflow(WorkflowDefinition("legacy", (
        Act("work", heartbeat_timeout_seconds=30), Act("after", ("work",)))))
    old = [wb.start_workflow("legacy", {"i": i}, request_id=f"old-{i}") for i in range(12)]
    running = wb.claim(workflow_name="legacy")
    assert running is not None
    for wx in old:
        _old_shape(wb, wx)
    # Unmigrated: the engine works (claims, heartbeats, timers on old shards) but the
    # listings do not see the old runs yet.
    assert wb.list_workflows(limit=50).items == ()
    assert wb.count_workflows(name="legacy") == 0
    report = migrate_index_keys(wb.store, page_size=5, max_pages=1)
    assert report.scanned == 5 and report.last_key is not None  # a resumable step
    report = migrate_index_keys(wb.store, page_size=5, start_key=report.last_key)
    assert report.last_key is None
    again = migrate_index_keys(wb.store)
    assert (again.scanned, again.rewritten) == (12, 0)  # idempotent
    assert sorted(w.workflow_exec_id for w in wb.list_workflows(limit=50).items) == sorted(old)
    assert wb.count_workflows(name="legacy", state=WorkflowState.RUNNING) == 12
    # Runs go on: the claimed attempt times out through its old timer shard, the others
    # are claimed from their old claimable shards and complete.
    # (past its deadline and the in-flight grace, docs/architecture.md)
    grace = wb.engine.in_flight_grace_seconds
    assert wb.sweep(clock.advance(31 + grace)).timed_out == [running.activity_exec_id]
    done = 0
    while (act := wb.claim(workflow_name="legacy")) is not None:
        wb.transition_activity(act.activity_exec_id, "COMPLETED", output={})
        done += 1
    assert done == 11 + 11  # "work" then "after" of every run not timed out
    assert wb.count_workflows(name="legacy", state=WorkflowState.COMPLETED) == 11
    item = wb.store.botocore.get_item(TableName=wb.store.table_name("workflow_exec"),
                                      Key={"workflow_exec_id": {"S": old[-1]}})["Item"]
    assert item["created_day"]["S"] in {specs.by_day_key(k)
                                        for k in range(specs.BY_DAY_SHARDS)}
    assert wb.get_activity(running.activity_exec_id).state is A.TIMED_OUT


def test_the_migrate_command_reports_what_it_did(ddb_endpoint: str, table_prefix: str) -> None:
    from typer.testing import CliRunner

    from whimbrel.cli.app import app
    with Whimbrel(ddb_endpoint, table_prefix) as wb:
        wb.create_tables()
        wb.register_workflow(WorkflowDefinition("legacy", (Act("work"),)))
        wx = wb.start_workflow("legacy")
        _old_shape(wb, wx)
        args = ["tables", "migrate", "--endpoint-url", ddb_endpoint,
                "--table-prefix", table_prefix, "--json"]
        first = CliRunner().invoke(app, args)
        assert first.exit_code == 0, first.output
        assert '"rewritten": 1' in first.output
        second = CliRunner().invoke(app, args)
        assert '"rewritten": 0' in second.output
        wb.store.delete_tables()


def test_a_dev_on_tables_from_before_moves_their_runs_at_start(
        wb: Whimbrel, ddb_endpoint: str, table_prefix: str) -> None:
    from whimbrel.local.runtime import LocalRuntime

    wb.register_workflow(WorkflowDefinition("legacy", (Act("work"),)))
    old = [wb.start_workflow("legacy", {"i": i}, request_id=f"dev-{i}") for i in range(3)]
    for wx in old:
        _old_shape(wb, wx)
    assert wb.count_workflows(name="legacy") == 0
    # `whimbrel dev --data-dir` on a folder of before: the runtime moves them at start.
    with LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0) as rt:
        assert rt.migrated == 3
        assert rt.client.count_workflows(name="legacy") == 3
    with LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0) as rt:
        assert rt.migrated == 0  # idempotent: nothing left to move


def test_tables_from_before_without_the_lease_table_name_the_command(
        wb: Whimbrel, clock: StepClock) -> None:
    wb.register_workflow(WorkflowDefinition("legacy", (Act("work", heartbeat_timeout_seconds=5),)))
    wb.start_workflow("legacy")
    act = wb.claim(workflow_name="legacy")
    assert act is not None
    wb.store.botocore.delete_table(TableName=specs.table_spec("lease").table_name(wb.store.table_prefix))
    wb.store.botocore.get_waiter("table_not_exists").wait(
        TableName=specs.table_spec("lease").table_name(wb.store.table_prefix))
    # Nothing due: a sweep takes no lease, and works.
    assert wb.sweep(clock()).timed_out == []
    # Something due: the sweep needs its lease and says what to run.
    clock.advance(5 + wb.engine.in_flight_grace_seconds + 1)
    with pytest.raises(StoreError, match="run `whimbrel tables create`") as missing:
        wb.sweep(clock())
    assert missing.value.aws_code == "ResourceNotFoundException"
    assert wb.get_activity(act.activity_exec_id).state is A.RUNNING  # nothing changed
    assert wb.create_tables() == [specs.table_spec("lease").table_name(wb.store.table_prefix)]
    assert wb.sweep(clock()).timed_out == [act.activity_exec_id]
