"""What the intake reads (issue 28): a ``workflow_request`` row starts its run with no
read of the run first (the start's conditional create says whether the run was there),
counted with ``Whimbrel.meter`` (the store's calls by operation) on DynamoDB Local."""

from __future__ import annotations

import time
from typing import Any

import boto3

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.engine import Outcome
from whimbrel.store import specs


def stream_record(wb: Whimbrel, logical: str, key: dict[str, Any]) -> dict[str, Any]:
    """The INSERT record Lambda would get for a row a Whimbrel client wrote."""
    spec = specs.table_spec(logical)
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    item = ddb.get_item(TableName=spec.table_name(wb.table_prefix), Key=key,
                        ConsistentRead=True)["Item"]
    return {"eventID": "ev", "eventName": "INSERT", "eventSource": "aws:dynamodb",
            "dynamodb": {"ApproximateCreationDateTime": float(int(time.time())),
                         "Keys": key, "NewImage": item, "SequenceNumber": "1",
                         "StreamViewType": "NEW_AND_OLD_IMAGES"}}


def test_a_request_row_starts_its_run_without_reading_it_first(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition(
        "one", (ActivityDefinition("A", launcher=LauncherSpec.external()),)))
    rid = wb.request_workflow("one", {"n": 1}, version=1)
    record = stream_record(wb, "workflow_request", {"workflow_request_id": {"S": rid}})
    wb.meter.reset()
    assert wb.intake.workflow_request(record).outcome is Outcome.STARTED
    # Was 4 requests, 1 of them a GetItem of the run's item to tell a redelivery (main
    # at 148a793: GetItem 1, PutItem 2, UpdateItem 1); the start's conditional create
    # tells it now. What the start itself writes is unchanged.
    assert wb.meter.calls["GetItem"] == 0, dict(wb.meter.calls)
    assert wb.meter.total_calls == 3, dict(wb.meter.calls)
    wx = workflow_exec_id_for(rid)
    assert wb.get_workflow(wx).activity("A") is not None

    # A redelivery of the row: the create loses, the start reads the run (to resume a
    # start that died half-way) and the row is a DUPLICATE.
    wb.meter.reset()
    assert wb.intake.workflow_request(record).outcome is Outcome.DUPLICATE
    assert wb.meter.calls["GetItem"] == 1, dict(wb.meter.calls)


def test_a_completion_reads_the_run_once_however_many_dependents_when_releases(
        wb: Whimbrel) -> None:
    # A releases four dependents, each decided by a `when`: one listing of the run's
    # rows serves them all (it was one Query of the run's partition per dependent).
    ext = LauncherSpec.external()
    dependents = ("b", "c", "d", "e")
    wb.register_workflow(WorkflowDefinition("gates", (
        ActivityDefinition("a", launcher=ext),
        *(ActivityDefinition(n, ("a",), launcher=ext, when=f"a.{n}") for n in dependents))))
    wx = wb.start_workflow("gates", {})
    aeid = activity_exec_id(wx, "a", 1)
    wb.transition_activity(aeid, "RUNNING")
    wb.meter.reset()
    wb.transition_activity(aeid, "COMPLETED", output={"b": True, "c": False, "d": True,
                                                        "e": False})
    # One listing shared by the four decisions, and one completion check for each
    # skipped sink (c, e): 3 Queries (main at 148a793: 6, a listing per dependent).
    assert wb.meter.calls["Query"] == 3, dict(wb.meter.calls)
    run = wb.get_workflow(wx)
    assert {n: run.activity(n).state.value for n in dependents} == {
        "b": "READY", "c": "SKIPPED", "d": "READY", "e": "SKIPPED"}
