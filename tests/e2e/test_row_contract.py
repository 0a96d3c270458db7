"""Simple API rows are held to the contract like every caller (issue 11), driven by raw
``PutItem`` through the local runtime's real streams."""

from __future__ import annotations

import time
import uuid

import pytest
from e2e_support import RawClient, event_row, rejection_about, wait_workflow

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState, WorkflowDefinition, WorkflowState
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import wait_until

pytestmark = pytest.mark.slow

ETL = WorkflowDefinition("etl", (Act("extract"), Act("transform", ("extract",)),
                                 Act("load", ("transform",))))
BEATING = WorkflowDefinition("beating", (Act("work", heartbeat_timeout_seconds=30),))


def test_a_row_that_breaks_a_guard_is_rejected_and_changes_nothing(
        runtime: LocalRuntime, raw: RawClient) -> None:
    runtime.client.register_workflow(ETL)
    wx = wait_workflow_started(runtime, raw.request("etl"))
    extract, load = activity_exec_id(wx, "extract", 1), activity_exec_id(wx, "load", 1)
    raw.event(extract, "RUNNING")
    wait_until(lambda: runtime.client.get_activity(extract).state is ActivityState.RUNNING)
    ready = raw.event(load, "READY")
    rejection = rejection_about(runtime, ready)
    assert rejection.error_type == "UpstreamNotCompleted"
    assert "transform (REQUESTED)" in rejection.reason
    row = event_row(runtime, ready)
    assert row["outcome"]["S"] == "REJECTED" and "transform" in row["reason"]["S"]
    assert runtime.client.get_activity(load).state is ActivityState.REQUESTED
    # A COMPLETED on the sink cannot complete the run either.
    rejection_about(runtime, raw.event(load, "COMPLETED"))
    assert runtime.client.get_workflow(wx).state is WorkflowState.RUNNING


def test_a_row_is_validated_whole_before_anything_is_applied(
        runtime: LocalRuntime, raw: RawClient) -> None:
    runtime.client.register_workflow(ETL)
    wx = wait_workflow_started(runtime, raw.request("etl"))
    extract = activity_exec_id(wx, "extract", 1)
    # COMPLETED ahead of its RUNNING would imply the RUNNING; with an output too large
    # nothing at all may be applied (it used to leave the activity RUNNING forever).
    huge = raw.event(extract, "COMPLETED", output={"blob": "x" * 70_000})
    assert "more than the limit" in rejection_about(runtime, huge).reason
    assert runtime.client.get_activity(extract).state is ActivityState.READY


def test_a_reused_id_is_rejected_and_the_run_keeps_what_started_it(
        runtime: LocalRuntime, raw: RawClient) -> None:
    runtime.client.register_workflow(ETL)
    request_id = str(uuid.uuid4())
    item = {"workflow_request_id": {"S": request_id}, "workflow_name": {"S": "etl"},
            "input": {"S": '{"day": 1}'}, "when_epoch": {"N": str(time.time())}}
    raw.ddb.put_item(TableName=f"{runtime.table_prefix}workflow_request", Item=item)
    wx = wait_workflow_started(runtime, request_id)
    raw.ddb.put_item(TableName=f"{runtime.table_prefix}workflow_request",
                     Item={**item, "input": {"S": '{"day": 2}'}})
    rejection = rejection_about(runtime, '{\\"day\\": 2}')
    assert rejection.error_type == "ReusedId" and wx in rejection.reason
    assert rejection.record["dynamodb"]["OldImage"]["input"] == {"S": '{"day": 1}'}
    assert runtime.client.get_workflow(wx).input == {"day": 1}
    # The same for an event id written twice with other content.
    extract = activity_exec_id(wx, "extract", 1)
    event_id = raw.event(extract, "RUNNING")
    wait_until(lambda: runtime.client.get_activity(extract).state is ActivityState.RUNNING)
    raw.ddb.put_item(TableName=f"{runtime.table_prefix}activity_event", Item={
        "activity_event_id": {"S": event_id}, "activity_exec_id": {"S": extract},
        "transition": {"S": "FAILED"}, "when_epoch": {"N": str(time.time())}})
    again = wait_until(lambda: next((r for r in runtime.client.list_rejections()
                                     if r.error_type == "ReusedId"
                                     and event_id in r.reason), None), timeout=15)
    assert extract in again.reason
    assert runtime.client.get_activity(extract).state is ActivityState.RUNNING
    # Writing the very same item again changes nothing, so DynamoDB sends no record.
    runtime.wait_idle()
    before = len(runtime.client.list_rejections())
    raw.ddb.put_item(TableName=f"{runtime.table_prefix}workflow_request",
                     Item={**item, "input": {"S": '{"day": 2}'}})
    runtime.wait_idle()
    assert len(runtime.client.list_rejections()) == before


def test_a_heartbeat_is_one_row(runtime: LocalRuntime, raw: RawClient) -> None:
    runtime.client.register_workflow(BEATING)
    wx = wait_workflow_started(runtime, raw.request("beating"))
    work = activity_exec_id(wx, "work", 1)
    raw.event(work, "RUNNING")
    wait_until(lambda: runtime.client.get_activity(work).state is ActivityState.RUNNING)
    first = runtime.client.get_activity(work).heartbeat_epoch
    beat = raw.event(work, "HEARTBEAT")
    row = event_row(runtime, beat)
    assert row["outcome"]["S"] == "APPLIED" and row["result_state"]["S"] == "RUNNING"
    assert "expires_epoch" in row  # processed rows expire with the retention
    after = runtime.client.get_activity(work)
    assert after.heartbeat_epoch is not None and first is not None
    assert after.heartbeat_epoch >= first
    # Once cancelled, a heartbeat row tells its sender to stop.
    runtime.client.cancel_workflow(wx)
    row = event_row(runtime, raw.event(work, "HEARTBEAT"))
    assert row["result_state"]["S"] == "CANCELLED_RUNNING"


def test_empty_maps_are_payloads_like_any_other(runtime: LocalRuntime,
                                                raw: RawClient) -> None:
    runtime.client.register_workflow(ETL)
    request_id = str(uuid.uuid4())
    raw.ddb.put_item(TableName=f"{runtime.table_prefix}workflow_request", Item={
        "workflow_request_id": {"S": request_id}, "workflow_name": {"S": "etl"},
        "input": {"M": {}}, "when_epoch": {"N": str(time.time())}})
    wx = wait_workflow_started(runtime, request_id)
    assert runtime.client.get_workflow(wx).input == {}
    extract = activity_exec_id(wx, "extract", 1)
    raw.event(extract, "RUNNING")
    raw.event(extract, "COMPLETED", output={}, native_output=True)
    wait_until(lambda: runtime.client.get_activity(extract).state is ActivityState.COMPLETED)
    assert runtime.client.get_activity(extract).output == {}


def test_a_simple_api_run_expires_with_its_rows(runtime: LocalRuntime,
                                                raw: RawClient) -> None:
    runtime.client.register_workflow(WorkflowDefinition("one", (Act("x"),)))
    request_id = raw.request("one")
    wx = wait_workflow_started(runtime, request_id)
    x = activity_exec_id(wx, "x", 1)
    raw.event(x, "RUNNING")
    done = raw.event(x, "COMPLETED")
    wf = wait_workflow(runtime, request_id)
    assert wf.state is WorkflowState.COMPLETED and wf.expires_epoch is not None
    assert event_row(runtime, done)["outcome"]["S"] == "APPLIED"
    request = runtime.client.store.cold.get_request(request_id)
    assert request is not None and request.expires_epoch == wf.expires_epoch


def wait_workflow_started(rt: LocalRuntime, request_id: str) -> str:
    """The run's id, once its start wrote every activity row (the roots come last)."""
    wx = workflow_exec_id_for(request_id)

    def started() -> bool:
        wf = rt.client.store.get_workflow(wx)
        if wf is None:
            return False
        names = rt.client.get_definition(wf.workflow_name, wf.version).names
        return len(rt.client.store.list_activities(wx)) == len(names)

    wait_until(started, timeout=15, message=f"request {request_id} started nothing")
    return wx
