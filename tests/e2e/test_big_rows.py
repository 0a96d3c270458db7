"""Raw rows at DynamoDB's 400 KB item limit (issue 31), through the local runtime: the
row is rejected and its sender still reads the verdict on it. Before, the marks no
longer fitted: the update was refused, the record retried and dead-lettered, and the
row never got an ``outcome``."""

from __future__ import annotations

import uuid
from typing import Any

import boto3

from whimbrel import ActivityDefinition, WorkflowDefinition
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import wait_until

LIMIT = 409_600  # DynamoDB's 400 KB, attribute names included


def _size(item: dict[str, dict[str, str]]) -> int:
    """The size of an item of S attributes (names and values, UTF-8)."""
    return sum(len(k.encode()) + len(v["S"].encode()) for k, v in item.items())


def _put(rt: LocalRuntime, table: str, item: dict[str, dict[str, str]], payload: str,
         size: int) -> None:
    """Put ``item`` with a ``payload`` attribute that makes it ``size`` bytes."""
    item[payload] = {"S": ""}
    item[payload]["S"] = "x" * (size - _size(item))
    assert _size(item) == size
    ddb = boto3.client("dynamodb", endpoint_url=rt.endpoint_url, region_name="us-east-1")
    ddb.put_item(TableName=rt.client.store.table_name(table), Item=item)


def _marked(rt: LocalRuntime, table: str, key: str, row_id: str) -> dict[str, Any]:
    ddb = boto3.client("dynamodb", endpoint_url=rt.endpoint_url, region_name="us-east-1")

    def outcome() -> dict[str, Any] | None:
        item = ddb.get_item(TableName=rt.client.store.table_name(table),
                            Key={key: {"S": row_id}}, ConsistentRead=True).get("Item")
        return item if item and "outcome" in item else None
    found: dict[str, Any] = wait_until(outcome, timeout=60,
                                       message=f"{row_id} never got its outcome")
    return found


def _dead_letters(rt: LocalRuntime) -> list[str]:
    return [r.reason for r in rt.client.list_rejections() if r.source == "dead_letter"]


def test_rows_at_the_item_limit_are_marked_with_their_verdict(runtime: LocalRuntime) -> None:
    rt = runtime
    near = str(uuid.uuid4())  # a few hundred bytes under the limit: the reason is cut
    _put(rt, "workflow_request", {"workflow_request_id": {"S": near},
                                  "workflow_name": {"S": "nope"}}, "input", LIMIT - 300)
    full = str(uuid.uuid4())  # at the limit: not even the verdict fits as the row is
    _put(rt, "activity_event", {"activity_event_id": {"S": full},
                                "activity_exec_id": {"S": "x:A:1"},
                                "transition": {"S": "COMPLETED"}}, "output", LIMIT)
    request = _marked(rt, "workflow_request", "workflow_request_id", near)
    assert request["outcome"] == {"S": "REJECTED"}
    assert "processed_epoch" in request and len(request["input"]["S"]) > 409_000
    reason = request.get("reason", {}).get("S", "")
    assert len(reason.encode()) <= 1000
    event = _marked(rt, "activity_event", "activity_event_id", full)
    assert event["outcome"] == {"S": "REJECTED"} and "output" not in event
    assert event["reason"]["S"].startswith(
        "removed from this row to make room for this mark (DynamoDB's 400 KB item limit): "
        "output (")
    assert event["activity_exec_id"] == {"S": "x:A:1"}  # the rest of the row is kept
    rt.wait_idle(timeout=60)  # every record handled: none retried towards a dead letter
    assert sum(p.stats.dead_lettered for p in rt.pumps.values()) == 0
    assert _dead_letters(rt) == []
    sources = sorted(r.source for r in rt.client.list_rejections())
    assert sources == ["activity_event", "workflow_request"]


def test_a_started_request_row_at_the_limit_lets_its_run_end(runtime: LocalRuntime) -> None:
    """A valid request row near the limit (an attribute Whimbrel ignores makes it big):
    its run starts; at the run's end the row's expiry did not fit, the end raised, and
    the run could never end."""
    rt = runtime
    rt.client.register_workflow(WorkflowDefinition("big", (ActivityDefinition("a"),)))
    rid = str(uuid.uuid4())
    _put(rt, "workflow_request", {"workflow_request_id": {"S": rid},
                                  "workflow_name": {"S": "big"}}, "notes", LIMIT - 8)
    wx = workflow_exec_id_for(rid)
    wait_until(lambda: rt.client.store.get_workflow(wx), timeout=60,
               message="the request never started its run")
    rt.client.cancel_workflow(wx)  # its end gives the row its expiry
    assert rt.client.get_workflow(wx).state.value == "CANCELLED"
    ddb = boto3.client("dynamodb", endpoint_url=rt.endpoint_url, region_name="us-east-1")
    row = ddb.get_item(TableName=rt.client.store.table_name("workflow_request"),
                       Key={"workflow_request_id": {"S": rid}}, ConsistentRead=True)["Item"]
    assert "expires_epoch" in row and "notes" not in row
    assert row["reason"]["S"].startswith("removed from this row to make room for this mark")
    assert row["workflow_name"] == {"S": "big"}
