"""Issue 29, attributes: a run started with ``attributes`` is listed by them (newest
first, paged, combined with name, state and time), through an index that spreads one
value over 32 shards; bad attributes are refused with nothing written — on DynamoDB
Local, through the Python API and a raw Simple API row."""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    InvalidInput,
    LauncherSpec,
    RetryPolicy,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
    workflow_exec_id_for,
)
from whimbrel.local.runtime import LambdaContext
from whimbrel.store import specs
from whimbrel.testing import StepClock

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # lambdas/ sits next to whimbrel/ in the checkout
    sys.path.append(str(ROOT))

from lambdas import workflow_request  # noqa: E402

CLOCK = StepClock
W = WorkflowState
EXT = LauncherSpec.external()


def _define(wb: Whimbrel, *names: str) -> None:
    for name in names:
        wb.register_workflow(WorkflowDefinition(name, (Act(
            "w", launcher=EXT, retry=RetryPolicy(max_attempts=1)),)))


def _ids(page: Any) -> list[str]:
    return [wf.workflow_exec_id for wf in page.items]


def test_runs_are_found_by_their_attributes(wb: Whimbrel, clock: StepClock) -> None:
    _define(wb, "attr_orders", "attr_exports")
    started: list[str] = []
    for i in range(5):
        clock.advance(1)
        started.append(wb.start_workflow("attr_orders", attributes={
            "customer": "c-17", "region": "eu" if i % 2 else "us", "n": i}))
    clock.advance(1)
    other = wb.start_workflow("attr_exports", attributes={"customer": "c-17"})
    clock.advance(1)
    wb.start_workflow("attr_orders", attributes={"customer": "c-18"})
    assert wb.get_workflow(started[1]).attributes == {"customer": "c-17", "region": "eu",
                                                      "n": 1}
    newest_first = [other, *reversed(started)]
    assert _ids(wb.list_workflows(attributes={"customer": "c-17"})) == newest_first
    # Combined with a name, another attribute, a number (17.0 is 17), a time window.
    assert _ids(wb.list_workflows(name="attr_orders", attributes={"customer": "c-17"})) \
        == list(reversed(started))
    assert _ids(wb.list_workflows(attributes={"customer": "c-17", "region": "eu"})) == [
        started[3], started[1]]
    assert _ids(wb.list_workflows(attributes={"n": 3.0})) == [started[3]]
    assert _ids(wb.list_workflows(attributes={"customer": "c-17"},
                                  since=clock() - 4.5, until=clock() - 1)) == [
        started[4], started[3], started[2]]  # created at +5, +4, +3 of +1..+7
    # A state: fail one, list the failures of the customer.
    # A claim takes any run's attempt (its shards are read from a random one): take
    # until it is one of c-17's (c-18's stays RUNNING, out of these listings).
    got = wb.claim(workflow_name="attr_orders")
    while got is not None and got.workflow_exec_id not in started:
        got = wb.claim(workflow_name="attr_orders")
    assert got is not None
    wb.transition_activity(got.activity_exec_id, Transition.FAILED, error="boom")
    failed = got.workflow_exec_id
    assert _ids(wb.list_workflows(state="FAILED", attributes={"customer": "c-17"})) == [
        failed]
    assert wb.count_workflows(attributes={"customer": "c-17"}) == 6
    # Paged: two at a time, every run once, in order.
    seen: list[str] = []
    cursor = None
    while True:
        page = wb.list_workflows(attributes={"customer": "c-17"}, limit=2, cursor=cursor)
        seen += _ids(page)
        if page.cursor is None:
            break
        cursor = page.cursor
    assert seen == newest_first
    with pytest.raises(InvalidInput, match="other filters"):
        wb.list_workflows(attributes={"customer": "c-18"}, limit=2, cursor=cursor or
                          wb.list_workflows(attributes={"customer": "c-17"},
                                            limit=2).cursor)


def test_one_value_shared_by_many_runs_is_spread_over_shards(wb: Whimbrel) -> None:
    _define(wb, "attr_hot")
    for _ in range(64):
        wb.start_workflow("attr_hot", attributes={"tenant": "big"})
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    items = ddb.scan(TableName=specs.WORKFLOW_ATTRIBUTE.table_name(wb.table_prefix))["Items"]
    keys = Counter(i["attr_key"]["S"] for i in items)
    assert sum(keys.values()) == 64
    assert all(k.startswith("tenant=s:big#") for k in keys)
    assert len(keys) >= 16, keys  # 64 runs over 32 shards: no one key takes them all
    assert max(keys.values()) <= 8, keys
    assert len(wb.list_workflows(attributes={"tenant": "big"}, limit=100).items) == 64


@pytest.mark.parametrize("attributes, why", [
    ({f"k{i}": i for i in range(11)}, "11 entries, more than the 10"),
    ({"9lives": "x"}, "name '9lives' must be a letter"),
    ({"ok": True}, "must be a string or a number, not bool"),
    ({"ok": {"nested": 1}}, "must be a string or a number, not dict"),
    ({"ok": ["a"]}, "must be a string or a number, not list"),
    ({"ok": "x" * 257}, "1 to 256 characters, not 257"),
    ({"ok": ""}, "1 to 256 characters, not 0"),
    ({"ok": float("nan")}, "finite number"),
    ("customer=c-17", "must be a mapping"),
])
def test_bad_attributes_are_refused_and_nothing_is_written(
        wb: Whimbrel, attributes: Any, why: str) -> None:
    _define(wb, "attr_bad")
    with pytest.raises(InvalidInput, match=why):
        wb.start_workflow("attr_bad", attributes=attributes)
    with pytest.raises(InvalidInput, match=why):
        wb.request_workflow("attr_bad", attributes=attributes)
    with pytest.raises(InvalidInput, match=why):
        wb.list_workflows(attributes=attributes)
    assert wb.count_workflows(name="attr_bad") == 0
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    assert ddb.scan(TableName=specs.WORKFLOW_ATTRIBUTE.table_name(wb.table_prefix),
                    Select="COUNT")["Count"] == 0
    assert ddb.scan(TableName=specs.WORKFLOW_REQUEST.table_name(wb.table_prefix),
                    Select="COUNT")["Count"] == 0


def test_a_request_row_a_fork_and_a_batch_carry_attributes(
        wb: Whimbrel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    _define(wb, "attr_rows")
    table = specs.WORKFLOW_REQUEST.table_name(wb.table_prefix)
    item = {"workflow_request_id": {"S": "attr-row-1"}, "workflow_name": {"S": "attr_rows"},
            "attributes": {"M": {"customer": {"S": "c-17"}, "tier": {"N": "2"}}}}
    boto3.client("dynamodb", endpoint_url=wb.endpoint_url,
                 region_name="us-east-1").put_item(TableName=table, Item=item)
    record = {"eventID": "ev-attr-1", "eventName": "INSERT", "eventVersion": "1.1",
              "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
              "eventSourceARN": f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}"
                                "/stream/2025-01-01T00:00:00",
              "dynamodb": {"ApproximateCreationDateTime": float(int(time.time())),
                           "Keys": {"workflow_request_id": item["workflow_request_id"]},
                           "NewImage": item, "SequenceNumber": "1", "SizeBytes": 100,
                           "StreamViewType": "NEW_AND_OLD_IMAGES"}}
    assert workflow_request.handler({"Records": [record]}, LambdaContext("attr", wb)) == {
        "batchItemFailures": []}
    wx = workflow_exec_id_for("attr-row-1")
    assert wb.get_workflow(wx).attributes == {"customer": "c-17", "tier": 2}
    rid = wb.request_workflow("attr_rows", attributes={"customer": "c-17"})
    row = wb.store.cold.get_request(rid)
    assert row is not None and row.attributes == '{"customer":"c-17"}'
    via_api = workflow_exec_id_for(rid)
    got = wb.claim(workflow_name="attr_rows")
    assert got is not None and got.workflow_exec_id == wx
    wb.transition_activity(got.activity_exec_id, Transition.FAILED, error="boom")
    fork = wb.fork_workflow(wx, from_activity="w")
    assert wb.get_workflow(fork).attributes == {"customer": "c-17", "tier": 2}
    assert set(_ids(wb.list_workflows(attributes={"tier": 2}))) == {wx, fork}
    report = wb.batch("cancel", attributes={"customer": "c-17"}, state="RUNNING")
    assert sorted(report.done) == sorted([fork]), report  # the row's run has FAILED
    assert via_api not in report.done  # never started: its row was not processed


def test_a_child_run_and_a_schedule_firing_carry_attributes(
        wb: Whimbrel, clock: StepClock) -> None:
    from whimbrel.contract.dataflow import child_request_id
    from whimbrel.contract.ids import activity_exec_id
    from whimbrel.testing import wait_until

    _define(wb, "attr_child")
    wb.register_workflow(WorkflowDefinition("attr_parent", (
        Act("sub", launcher=LauncherSpec.workflow("attr_child")),)))
    wx = wb.start_workflow("attr_parent", attributes={"customer": "c-17"})
    child = workflow_exec_id_for(child_request_id(activity_exec_id(wx, "sub", 1)))
    wait_until(lambda: wb.find_workflow(child), message="child started")
    assert wb.get_workflow(child).attributes == {"customer": "c-17"}
    assert set(_ids(wb.list_workflows(attributes={"customer": "c-17"}))) == {wx, child}
    with pytest.raises(InvalidInput, match="must be a string or a number"):
        wb.create_schedule("attr_bad_tick", "attr_child", every_seconds=60,
                           attributes={"tenant": ["x"]})
    wb.create_schedule("attr_tick", "attr_child", every_seconds=60,
                       attributes={"tenant": "t-9"})
    clock.now = (clock() // 60 + 1) * 60
    report = wb.sweep(clock())
    assert not report.errors, report.errors
    [fired] = wb.list_workflows(attributes={"tenant": "t-9"}).items
    assert fired.attributes == {"tenant": "t-9"} and fired.source == "schedule:attr_tick"
