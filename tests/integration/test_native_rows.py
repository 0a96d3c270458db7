"""Native DynamoDB types in Simple API rows, read back on every path (issue 20, item 1).

docs/simple-api.md lets a raw client write a payload as a native map (``{"M": ...}``)
instead of JSON text. Both rows below are written with a raw PutItem on DynamoDB Local
and fed, as Lambda-shaped stream records, to the real Lambda handlers; the run must end
and every bookkeeping write on the rows (``expire_request`` at the run's end, the event
row's marking) must land, with no exception and nothing dead-lettered. On the PynamoDB
store the request's end raised ``AttributeDeserializationError`` (its model read
``input`` as text) and the event's marking raised on every delivery.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel import WorkflowState as W
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.local.runtime import LambdaContext
from whimbrel.store import specs
from whimbrel.testing import StepClock

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # lambdas/ sits next to whimbrel/ in the checkout
    sys.path.append(str(ROOT))

from lambdas import activity_event, workflow_request  # noqa: E402

#: The docs' own example of a native output (docs/simple-api.md).
NATIVE_OUTPUT = {"M": {"rows": {"N": "42"}}}
NATIVE_INPUT = {"M": {"city": {"S": "Lisbon"}, "days": {"N": "3"},
                      "tags": {"L": [{"S": "a"}, {"BOOL": True}]}}}


@pytest.fixture(autouse=True)
def _no_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")


@pytest.fixture
def wb(ddb_endpoint: str, table_prefix: str) -> Iterator[Whimbrel]:
    # A clock that stands still, but today (DynamoDB Local deletes items whose TTL passed).
    client = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                      clock=StepClock(time.time()))
    client.create_tables()
    client.register_workflow(WorkflowDefinition(
        "native", (ActivityDefinition("A", launcher=LauncherSpec.external()),)))
    yield client
    client.close()


def put_raw(wb: Whimbrel, logical: str, item: dict[str, Any]) -> dict[str, Any]:
    """A raw client's PutItem, and the stream record Lambda would get for it."""
    spec = specs.table_spec(logical)
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    ddb.put_item(TableName=spec.table_name(wb.table_prefix), Item=item)
    key = spec.hash_key.name
    return {"eventID": f"ev-{item[key]['S']}", "eventName": "INSERT", "eventVersion": "1.1",
            "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
            "eventSourceARN": f"arn:aws:dynamodb:us-east-1:123456789012:table/"
                              f"{spec.table_name(wb.table_prefix)}/stream/2025-01-01T00:00:00",
            "dynamodb": {"ApproximateCreationDateTime": float(int(time.time())),
                         "Keys": {key: item[key]}, "NewImage": item,
                         "SequenceNumber": "1000", "SizeBytes": 100,
                         "StreamViewType": "NEW_AND_OLD_IMAGES"}}


def raw_item(wb: Whimbrel, logical: str, key: dict[str, Any]) -> dict[str, Any]:
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    item: dict[str, Any] = ddb.get_item(TableName=specs.table_spec(logical).table_name(
        wb.table_prefix), Key=key, ConsistentRead=True)["Item"]
    return item


def test_native_input_and_output_round_trip_through_the_lambdas(wb: Whimbrel) -> None:
    ctx = LambdaContext("native-rows", wb)
    request = put_raw(wb, "workflow_request", {
        "workflow_request_id": {"S": "native-1"}, "workflow_name": {"S": "native"},
        "input": NATIVE_INPUT})
    assert workflow_request.handler({"Records": [request]}, ctx) == {"batchItemFailures": []}
    wx = workflow_exec_id_for("native-1")
    assert wb.get_workflow(wx).input == {"city": "Lisbon", "days": 3, "tags": ["a", True]}
    # The request row reads back, its native input as JSON text.
    stored = wb.store.cold.get_request("native-1")
    assert stored is not None
    assert json.loads(stored.input or "null") == {"city": "Lisbon", "days": 3,
                                                  "tags": ["a", True]}

    aeid = activity_exec_id(wx, "A", 1)
    event = put_raw(wb, "activity_event", {
        "activity_event_id": {"S": "native-ev-1"}, "activity_exec_id": {"S": aeid},
        "transition": {"S": "RUNNING"}})
    assert activity_event.handler({"Records": [event]}, ctx) == {"batchItemFailures": []}
    done = put_raw(wb, "activity_event", {
        "activity_event_id": {"S": "native-ev-2"}, "activity_exec_id": {"S": aeid},
        "transition": {"S": "COMPLETED"}, "output": NATIVE_OUTPUT})
    # The run ends in this delivery: expire_request runs on the row with the native input.
    assert activity_event.handler({"Records": [done]}, ctx) == {"batchItemFailures": []}

    wf = wb.get_workflow(wx)
    assert wf.state is W.COMPLETED
    assert wf.activities[-1].output == {"rows": 42}
    # Both bookkeeping writes landed on the rows with native values.
    row = raw_item(wb, "activity_event", {"activity_event_id": {"S": "native-ev-2"}})
    assert row["outcome"]["S"] == "APPLIED", row
    assert row["output"] == NATIVE_OUTPUT  # untouched
    req_row = raw_item(wb, "workflow_request", {"workflow_request_id": {"S": "native-1"}})
    assert "expires_epoch" in req_row and req_row["input"] == NATIVE_INPUT
    # A replayed record of the ended run is harmless too (marks again, raises nothing).
    assert activity_event.handler({"Records": [done]}, ctx) == {"batchItemFailures": []}
    assert workflow_request.handler({"Records": [request]}, ctx) == {"batchItemFailures": []}


def test_a_sweep_after_a_native_request_run_raises_nothing(wb: Whimbrel) -> None:
    """The store call the sweep made on every pass (expire_request on the run's request
    row) works on a row whose input is a native map."""
    put_raw(wb, "workflow_request", {
        "workflow_request_id": {"S": "native-2"}, "workflow_name": {"S": "native"},
        "input": NATIVE_INPUT, "manual": {"BOOL": False}})
    wb.store.cold.expire_request("native-2", 2_000_000_000.0)
    wb.store.cold.mark_request("native-2", {"outcome": "STARTED", "reason": "test"})
    row = raw_item(wb, "workflow_request", {"workflow_request_id": {"S": "native-2"}})
    assert row["expires_epoch"] == {"N": "2000000000"}
    assert row["outcome"] == {"S": "STARTED"}
    assert row["input"] == NATIVE_INPUT
