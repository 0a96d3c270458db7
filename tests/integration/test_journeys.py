"""Lean journeys (issue 21): the requests a ``start_workflow`` and an ``activity_event``
row cost, counted through the store's meter (every request of the store goes through
one transport, so the meter sees them all), on DynamoDB Local.

What each request is for (DESIGN.md §5); a change that adds one fails here:

``start_workflow`` of a one-activity run whose root is claimed by a worker:
    GetItem  workflow_definition  the latest version number (none was asked for), from
                                  one of the name's 16 copies; the version itself is
                                  parsed once per process
    PutItem  workflow_request     the Full Logic trace row
    PutItem  workflow_exec        the run, RUNNING (attribute_not_exists: one start)
    PutItem  activity_exec        the root, READY and claimable
    (no re-read of the run: a root that is only claimed is not launched, and a claim
    checks the run's state itself)

an ``activity_event`` row that COMPLETES the run's last attempt:
    GetItem  activity_exec        the intake reads the attempt (engine; the conditional
                                  write below would return it on a lost race anyway)
    GetItem  workflow_exec        the run (its definition version, its state)
    UpdateItem activity_exec      RUNNING -> COMPLETED (state = :expected)
    Query    activity_exec        the run's attempts, to decide its end
    UpdateItem workflow_exec      RUNNING -> COMPLETED
    UpdateItem activity_event     the row's outcome, for its sender
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel import ActivityState as A
from whimbrel import WorkflowState as W
from whimbrel.contract.ids import activity_exec_id
from whimbrel.local.runtime import LambdaContext
from whimbrel.testing import StepClock

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # lambdas/ sits next to whimbrel/ in the checkout
    sys.path.append(str(ROOT))

from lambdas import activity_event  # noqa: E402


@pytest.fixture
def wb(ddb_endpoint: str, table_prefix: str,
       monkeypatch: pytest.MonkeyPatch) -> Iterator[Whimbrel]:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    client = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                      clock=StepClock(time.time()))
    client.create_tables()
    client.register_workflow(WorkflowDefinition(
        "one", (ActivityDefinition("A", launcher=LauncherSpec.external()),)))
    yield client
    client.close()


def requests_of(wb: Whimbrel) -> list[tuple[str, str]]:
    """Records (operation, logical table) of every request the store sends from now."""
    seen: list[tuple[str, str]] = []
    prefix = wb.table_prefix

    def observe(operation: str, params: dict[str, Any], _resp: Any) -> None:
        seen.append((operation, str(params.get("TableName", "")).removeprefix(prefix)))

    wb.store.tables.client.observers.append(observe)
    return seen


def at_most(seen: list[tuple[str, str]], allowed: dict[tuple[str, str], int]) -> list[str]:
    counts: dict[tuple[str, str], int] = {}
    for key in seen:
        counts[key] = counts.get(key, 0) + 1
    return [f"{op} {table}: {n} > {allowed.get((op, table), 0)}"
            for (op, table), n in counts.items() if n > allowed.get((op, table), 0)]


# The run's ``roots_ready`` write (engine/lost.py) replaces the start's re-read of the
# run: it says every first attempt exists (so a lost one is never created again) and
# checks, in the same write, that the run is still RUNNING.
START = {("GetItem", "workflow_definition"): 1, ("PutItem", "workflow_request"): 1,
         ("PutItem", "workflow_exec"): 1, ("PutItem", "activity_exec"): 1,
         ("UpdateItem", "workflow_exec"): 1}
EVENT = {("GetItem", "activity_exec"): 1, ("GetItem", "workflow_exec"): 1,
         ("UpdateItem", "activity_exec"): 1, ("Query", "activity_exec"): 1,
         ("UpdateItem", "workflow_exec"): 1, ("UpdateItem", "activity_event"): 1}


def test_start_workflow_makes_only_the_requests_it_needs(wb: Whimbrel) -> None:
    wb.start_workflow("one")  # the first start also loads the definition's version cache
    wb.meter.reset()
    seen = requests_of(wb)
    wb.start_workflow("one", {"x": 1})
    seen = list(seen)
    assert not at_most(seen, START), at_most(seen, START)
    # The writes exactly-once needs are all there: the trace, the run, the root.
    assert {("PutItem", t) for t in ("workflow_request", "workflow_exec",
                                     "activity_exec")} <= set(seen)
    assert wb.meter.total_calls == len(seen)  # the meter saw every request
    assert len(seen) == 5


def test_an_activity_event_row_makes_only_the_requests_it_needs(wb: Whimbrel) -> None:
    wx = wb.start_workflow("one")
    aeid = activity_exec_id(wx, "A", 1)
    wb.store.move_activity(aeid, A.READY, [A.RUNNING], {}, now=time.time(), actor="worker")
    table = wb.store.table_name("activity_event")
    item = {"activity_event_id": {"S": "journey-1"}, "activity_exec_id": {"S": aeid},
            "transition": {"S": "COMPLETED"}, "output": {"M": {"rows": {"N": "42"}}}}
    boto3.client("dynamodb", endpoint_url=wb.endpoint_url,
                 region_name=os.environ.get("AWS_REGION", "us-east-1")).put_item(
        TableName=table, Item=item)
    record = {"eventID": "1", "eventName": "INSERT", "eventVersion": "1.1",
              "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
              "eventSourceARN": f"arn:aws:dynamodb:us-east-1:1:table/{table}/stream/s",
              "dynamodb": {"ApproximateCreationDateTime": float(int(time.time())),
                           "Keys": {"activity_event_id": item["activity_event_id"]},
                           "NewImage": item, "SequenceNumber": "1", "SizeBytes": 1,
                           "StreamViewType": "NEW_AND_OLD_IMAGES"}}
    wb.meter.reset()
    seen = requests_of(wb)
    result = activity_event.handler({"Records": [record]}, LambdaContext("journey", wb))
    seen, calls = list(seen), wb.meter.total_calls
    assert result == {"batchItemFailures": []}
    assert not at_most(seen, EVENT), at_most(seen, EVENT)
    assert ("UpdateItem", "activity_exec") in seen and ("UpdateItem", "activity_event") in seen
    assert calls == len(seen)
    assert wb.get_workflow(wx).state is W.COMPLETED
