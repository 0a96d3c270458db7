"""Issue 19, item 3: a map's items in partitions of their own (``map_item``), and a small
run item (a large input kept in ``workflow_exec_data``), on DynamoDB Local.

The items of one map spread over ``MAP_ITEM_PARTITIONS`` partition keys, and the run
still lists, ends, redrives and reconciles with Queries only; a guard's consistent read
of a run with a 10,000-element input is one read unit; a map expanded before
``map_item`` existed (its items in the run's partition) runs to its end.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import Any

import boto3
import pytest
import wb_data_activities as data

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.ids import activity_exec_id
from whimbrel.store import specs
from whimbrel.testing import Crash, assert_contract_holds

A, W = ActivityState, WorkflowState
py = LauncherSpec.python


def _ddb(wb: Whimbrel) -> Any:
    return boto3.client("dynamodb", endpoint_url=wb.endpoint_url,
                        region_name=os.environ.get("AWS_REGION", "us-east-1"))


def _partition(wb: Whimbrel, table: str, key: str, value: str) -> list[dict[str, Any]]:
    """Every item under one partition-key value, read raw (as any AWS client would)."""
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {
        "TableName": wb.store.table_name(table), "ConsistentRead": True,
        "KeyConditionExpression": "#k = :v", "ExpressionAttributeNames": {"#k": key},
        "ExpressionAttributeValues": {":v": {"S": value}}}
    while True:
        page = _ddb(wb).query(**params)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return items
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


class Requests:
    """(operation, logical table, consumed units) of every request the store sends."""

    def __init__(self, wb: Whimbrel) -> None:
        self.prefix = wb.table_prefix
        self.seen: list[tuple[str, str, float]] = []
        self._lock = threading.Lock()
        wb.store.tables.client.observers.append(self)

    def __call__(self, operation: str, params: dict[str, Any],
                 response: dict[str, Any] | None) -> None:
        table = str(params.get("TableName", "")).removeprefix(self.prefix)
        consumed = (response or {}).get("ConsumedCapacity") or {}
        units = float(consumed.get("CapacityUnits") or 0.0) if isinstance(consumed, dict) \
            else 0.0
        with self._lock:
            self.seen.append((operation, table, units))

    def of(self, operation: str, table: str) -> list[float]:
        with self._lock:
            return [u for op, t, u in self.seen if (op, t) == (operation, table)]


def test_items_land_on_many_partition_keys_and_the_run_lists_and_ends(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("spread", (
        Act("each", launcher=py("wb_data_activities:item"), map_over="$input.xs",
            max_concurrency=8),
        Act("after", ("each",), launcher=py("wb_data_activities:indices")),
    ))
    wb.register_workflow(defn)
    wx = wb.start_workflow("spread", {"xs": list(range(40))})
    wf = wb.wait(wx, timeout=60)
    assert wf.state is W.COMPLETED, wf
    assert_contract_holds(wf, defn)
    assert len(wf.items) == 40 and wf.activity("after").output == list(range(40))
    # Raw: the items are in map_item, item i under <wx>/each/<i mod 16>, with the
    # contract's attributes as in activity_exec; the run's partition holds the map's row.
    per_key = {k: _partition(wb, "map_item", "item_partition", f"{wx}/each/{k}")
               for k in range(specs.MAP_ITEM_PARTITIONS)}
    assert sum(len(v) for v in per_key.values()) == 40
    assert len([k for k, v in per_key.items() if v]) == specs.MAP_ITEM_PARTITIONS > 1
    for k, rows in per_key.items():
        for row in rows:
            index = int(row["activity_name"]["S"].split("#")[1])
            assert index % specs.MAP_ITEM_PARTITIONS == k
            assert row["workflow_exec_id"]["S"] == wx
            assert row["activity_exec_id"]["S"] == activity_exec_id(wx, f"each#{index}", 1)
            assert row["state"]["S"] == "COMPLETED"
    beside = _partition(wb, "activity_exec", "workflow_exec_id", wx)
    assert sorted(r["activity_name"]["S"] for r in beside) == ["after", "each"]
    # An item is one GetItem (its place follows from its id), in a fresh process too.
    with Whimbrel(endpoint_url=wb.endpoint_url, table_prefix=wb.table_prefix) as other:
        seen = Requests(other)
        item = other.get_activity(activity_exec_id(wx, "each#37", 1))
        assert item.state is A.COMPLETED and item.output == {"index": 37, "element": 37}
        assert [(op, t) for op, t, _ in seen.seen if t in ("map_item", "activity_exec")] \
            == [("GetItem", "map_item")]  # (the other read: the definition, once)
        # Listing the run: Queries only, one of the run's partition and one per
        # partition of the map (no Scan), and every item comes back.
        seen.seen.clear()
        listed = other.get_workflow(wx)
        assert len(listed.items) == 40
        ops = Counter((op, t) for op, t, _ in seen.seen)
        assert ops[("Query", "activity_exec")] == 1
        assert ops[("Query", "map_item")] == specs.MAP_ITEM_PARTITIONS
        assert {op for op, _, _ in seen.seen} <= {"GetItem", "Query"}


def test_a_redrive_keeps_completed_items_in_their_partitions(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("strict_spread", (
        Act("each", launcher=py("wb_data_activities:flaky_item"), map_over="$input.xs",
            max_concurrency=4),))
    wb.register_workflow(defn)
    xs = [f"e{i}" for i in range(20)]
    data.FAILING.add("e13")
    try:
        wx = wb.start_workflow("strict_spread", {"xs": xs})
        failed = wb.wait(wx, timeout=60)
    finally:
        data.FAILING.discard("e13")
    assert failed.state is W.FAILED and failed.activity("each").state is A.FAILED
    done_before = {i for i, a in failed.map_items("each").items() if a.state is A.COMPLETED}
    assert done_before and 13 not in done_before
    runs_before = len([r for r in data.RUNS if r[0] == wx])
    wb.redrive_workflow(wx)
    wf = wb.wait(wx, timeout=60)
    assert wf.state is W.COMPLETED, wf
    assert [o["element"] for o in wf.activity("each").output] == xs
    again = {int(name.split("#")[1]) for w, name, _ in data.RUNS[:] if w == wx}
    rerun = [r for r in data.RUNS if r[0] == wx][runs_before:]
    assert again == set(range(20))
    assert not {int(name.split("#")[1]) for _, name, _ in rerun} & done_before
    assert_contract_holds(wf, defn)


def test_the_reconciler_repairs_a_chain_step_lost_in_a_partition(wb: Whimbrel,
                                                                 clock: Any) -> None:
    """The write that creates an item's successor (in map_item) never lands: the
    reconciler, which lists the map's partitions, creates it; the run then ends."""
    defn = WorkflowDefinition("lost_step", (
        Act("each", map_over="$input.xs", max_concurrency=1),))  # external items
    wb.register_workflow(defn)
    wx = wb.start_workflow("lost_step", {"xs": ["a", "b", "c"]})

    def crash(phase: str, operation: str, table: str) -> None:
        if (phase, operation, table) == ("before", "PutItem", "map_item"):
            raise Crash(f"crash before {operation} {table}")

    first = wb.claim(workflow_name="lost_step")
    assert first is not None and first.activity_name == "each#0"
    wb.store.write_hooks.append(crash)
    try:
        with pytest.raises(Crash):
            wb.transition_activity(first.activity_exec_id, "COMPLETED", output="A")
    finally:
        wb.store.write_hooks.remove(crash)
    assert wb.store.get_activity(activity_exec_id(wx, "each#1", 1)) is None
    for _ in range(5):  # the reconcile visit comes after its grace period
        clock.advance(200)
        wb.sweep()
        if wb.store.get_activity(activity_exec_id(wx, "each#1", 1)) is not None:
            break
    for n in (1, 2):
        act = wb.claim(workflow_name="lost_step")
        assert act is not None and act.activity_name == f"each#{n}"
        wb.transition_activity(act.activity_exec_id, "COMPLETED", output="BC"[n - 1])
    wf = wb.get_workflow(wx)
    assert wf.state is W.COMPLETED and wf.activity("each").output == ["A", "B", "C"]
    assert_contract_holds(wf, defn)


def test_guard_reads_of_a_run_with_a_large_input_cost_one_read_unit(wb: Whimbrel) -> None:
    """A 10,000-element input (49 KB) is kept apart: every consistent read of the run's
    item is one read unit, and the input is read where it is needed (an activity's
    input, the run's status), from workflow_exec_data."""
    defn = WorkflowDefinition("ballast", (
        Act("nums", launcher=py("wb_data_activities:numbers")),
        Act("each", ("nums",), launcher=py("wb_data_activities:item"),
            map_over="$input.xs", max_concurrency=3),
    ), retention_days=1)
    wb.register_workflow(defn)
    given = {"n": 4, "xs": list(range(12)), "ballast": list(range(10_000))}
    seen = Requests(wb)
    wx = wb.start_workflow("ballast", given)
    wf = wb.wait(wx, timeout=120)
    assert wf.state is W.COMPLETED, wf
    assert [o["element"] for o in wf.activity("each").output] == list(range(12))
    guard_reads = seen.of("GetItem", "workflow_exec")
    assert guard_reads and max(guard_reads) <= 1.0, guard_reads
    # The input itself is 13 units a consistent read: read once in this process.
    assert len(seen.of("GetItem", "workflow_exec_data")) == 1
    assert min(seen.of("GetItem", "workflow_exec_data")) >= 12
    assert wf.activity("nums").output == [0, 1, 2, 3]  # it read n from the input
    assert wf.input == given  # the status shows the input
    assert wb.list_workflows(name="ballast").items[0].input == given
    # Raw, the run's item is small and says where its input is; the data item expires
    # with the run.
    raw = _ddb(wb).get_item(TableName=wb.store.table_name("workflow_exec"),
                            Key={"workflow_exec_id": {"S": wx}}, ConsistentRead=True,
                            ReturnConsumedCapacity="TOTAL")
    assert raw["ConsumedCapacity"]["CapacityUnits"] == 1.0
    assert "input" not in raw["Item"] and raw["Item"]["input_apart"] == {"BOOL": True}
    assert raw["Item"]["state"] == {"S": "COMPLETED"}
    [kept] = _partition(wb, "workflow_exec_data", "workflow_exec_id", wx)
    assert kept["part"] == {"S": "input"}
    assert kept["expires_epoch"] == raw["Item"]["expires_epoch"]


def test_a_kept_apart_input_loses_its_expiry_on_a_redrive(wb: Whimbrel) -> None:
    """The input kept apart expires with its run, and a redrive takes that expiry off
    before the run goes on (the input must never go before its run)."""
    defn = WorkflowDefinition("ballast_redrive", (
        Act("each", map_over="$input.xs", max_concurrency=1,  # external items
            retry=RetryPolicy(max_attempts=1)),), retention_days=1)
    wb.register_workflow(defn)
    xs = ["x" * 600, "y" * 600]  # more than 1 KB of JSON
    wx = wb.start_workflow("ballast_redrive", {"xs": xs})
    act = wb.claim(workflow_name="ballast_redrive")
    assert act is not None
    wb.transition_activity(act.activity_exec_id, "FAILED", error="disk full")
    assert wb.get_workflow(wx).state is W.FAILED
    [kept] = _partition(wb, "workflow_exec_data", "workflow_exec_id", wx)
    ended = wb.store.get_workflow(wx)
    assert ended is not None and ended.input_apart and ended.input is None
    assert float(kept["expires_epoch"]["N"]) == ended.expires_epoch
    wb.redrive_workflow(wx)
    [kept] = _partition(wb, "workflow_exec_data", "workflow_exec_id", wx)
    assert "expires_epoch" not in kept and wb.get_workflow(wx).state is W.RUNNING
    for out in ("X", "Y"):
        act = wb.claim(workflow_name="ballast_redrive")
        assert act is not None
        wb.transition_activity(act.activity_exec_id, "COMPLETED", output=out)
    wf = wb.get_workflow(wx)
    assert wf.state is W.COMPLETED and wf.activity("each").output == ["X", "Y"]
    assert wf.input == {"xs": xs}
    [kept] = _partition(wb, "workflow_exec_data", "workflow_exec_id", wx)
    assert float(kept["expires_epoch"]["N"]) == wb.store.get_workflow(wx).expires_epoch  # type: ignore[union-attr]


def test_a_map_expanded_before_map_item_runs_on_in_its_runs_partition(
        wb: Whimbrel) -> None:
    """Items written where a release before this one put them (the run's partition of
    activity_exec): a new process finds them by id, claims them, creates the rest of the
    map beside them, and the run ends; nothing of that run goes to map_item."""
    defn = WorkflowDefinition("old_map", (
        Act("each", map_over="$input.xs", max_concurrency=1),))  # external items
    wb.register_workflow(defn)
    wx = wb.start_workflow("old_map", {"xs": ["a", "b", "c"]})
    first = activity_exec_id(wx, "each#0", 1)
    # Move item 0 where the release before put it, as it wrote it (no item_partition).
    ddb = _ddb(wb)
    key = {"item_partition": {"S": f"{wx}/each/0"}, "activity_exec_id": {"S": first}}
    row = ddb.get_item(TableName=wb.store.table_name("map_item"), Key=key,
                       ConsistentRead=True)["Item"]
    ddb.delete_item(TableName=wb.store.table_name("map_item"), Key=key)
    row.pop("item_partition")
    ddb.put_item(TableName=wb.store.table_name("activity_exec"), Item=row)
    with Whimbrel(endpoint_url=wb.endpoint_url, table_prefix=wb.table_prefix) as later:
        assert later.get_activity(first).state is A.READY  # found beside the run
        for n, out in enumerate("ABC"):
            act = later.claim(workflow_name="old_map")
            assert act is not None and act.activity_name == f"each#{n}"
            later.heartbeat(act.activity_exec_id)
            later.transition_activity(act.activity_exec_id, "COMPLETED", output=out)
        wf = later.get_workflow(wx)
        assert wf.state is W.COMPLETED and wf.activity("each").output == ["A", "B", "C"]
        assert_contract_holds(wf, defn)
    beside = _partition(wb, "activity_exec", "workflow_exec_id", wx)
    assert sorted(r["activity_name"]["S"] for r in beside) == \
        ["each", "each#0", "each#1", "each#2"]
    assert not any(_partition(wb, "map_item", "item_partition", f"{wx}/each/{k}")
                   for k in range(3))
