"""Data-driven runs through the Simple Lambda API (the local runtime's real streams and
the Lambda handlers): map items reported by raw rows, a child run started by the
stream Lambda, FAILED rows with an error_type that is not retried, and REDRIVE rows."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from e2e_support import RawClient, wait_workflow

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState, LauncherSpec, RetryPolicy, WorkflowDefinition, WorkflowState
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import assert_contract_holds, wait_until

pytestmark = pytest.mark.slow
A, W = ActivityState, WorkflowState


def redrive_row(raw: RawClient, wx: str, **extra: Any) -> str:
    """One raw PutItem, as any language would write it."""
    event_id = str(uuid.uuid4())
    item = {"activity_event_id": {"S": event_id}, "transition": {"S": "REDRIVE"},
            "workflow_exec_id": {"S": wx}, "when_epoch": {"N": str(time.time())}, **extra}
    raw.ddb.put_item(TableName=f"{raw.prefix}activity_event", Item=item)
    return event_id


def row(raw: RawClient, event_id: str) -> dict[str, Any]:
    got = raw.ddb.get_item(TableName=f"{raw.prefix}activity_event",
                           Key={"activity_event_id": {"S": event_id}}, ConsistentRead=True)
    return {k: next(iter(v.values())) for k, v in got.get("Item", {}).items()}


def state(rt: LocalRuntime, aeid: str) -> str | None:
    item = rt.client.store.get_activity(aeid)
    return None if item is None or item.state is None else item.state.value


def test_external_map_items_by_raw_rows_then_redrive_by_a_raw_row(
        runtime: LocalRuntime, raw: RawClient) -> None:
    defn = WorkflowDefinition("rows_map", (
        Act("each", map_over="$input.xs", max_concurrency=2,
            retry=RetryPolicy(max_attempts=3, non_retryable=("Corrupt",))),))
    runtime.client.register_workflow(defn)
    request_id = raw.request("rows_map", {"xs": ["a", "b", "c"]})
    wx = workflow_exec_id_for(request_id)
    first = activity_exec_id(wx, "each#0", 1)
    wait_until(lambda: state(runtime, first) == "READY", message="item 0 READY")
    assert state(runtime, activity_exec_id(wx, "each#2", 1)) is None  # not created yet
    raw.event(first, "RUNNING")
    raw.event(first, "COMPLETED", output={"did": "a"})
    second = activity_exec_id(wx, "each#1", 1)
    wait_until(lambda: state(runtime, second) == "READY", message="item 1 READY")
    raw.event(second, "RUNNING")
    raw.event(second, "FAILED", error="bad bytes", error_type="Corrupt")  # not retried
    failed = wait_workflow(runtime, request_id)
    assert failed.state is W.FAILED
    assert failed.map_items("each")[1].attempt == 1
    assert failed.map_items("each")[1].error_type == "Corrupt"

    event_id = redrive_row(raw, wx)
    retry = activity_exec_id(wx, "each#1", 2)
    wait_until(lambda: state(runtime, retry) == "READY", message="item 1 again")
    wait_until(lambda: row(raw, event_id).get("outcome"), message="REDRIVE row marked")
    assert row(raw, event_id)["outcome"] == "APPLIED"
    assert row(raw, event_id)["result_state"] == "RUNNING"
    # Item 2 was created (after item 0) and cancelled with the failing map: it runs
    # again as its attempt 2.
    assert failed.map_items("each")[2].state is A.CANCELLED
    for aeid in (retry, activity_exec_id(wx, "each#2", 2)):
        wait_until(lambda a=aeid: state(runtime, a) == "READY", message=f"{aeid} READY")
        raw.event(aeid, "RUNNING")
        raw.event(aeid, "COMPLETED", output={"did": aeid[-8:]})
    done = wait_workflow(runtime, request_id)
    assert done.state is W.COMPLETED and done.redrive_count == 1
    out = done.activity("each").output
    assert out[0] == {"did": "a"} and len(out) == 3
    assert done.map_items("each")[0].attempt == 1  # completed before: kept
    assert_contract_holds(done, defn)
    # The same REDRIVE row written again is harmless; a new one on a COMPLETED run is
    # rejected, saying why.
    again = redrive_row(raw, wx)
    wait_until(lambda: row(raw, again).get("outcome") == "REJECTED",
               message="REDRIVE of a COMPLETED run rejected")
    assert "only a FAILED, CANCELLED or TIMED_OUT run" in row(raw, again)["reason"]
    missing = redrive_row(raw, wx, workflow_exec_id={"S": "no-such-run"})
    wait_until(lambda: row(raw, missing).get("outcome") == "REJECTED", message="unknown run")
    malformed = str(uuid.uuid4())
    raw.ddb.put_item(TableName=f"{raw.prefix}activity_event", Item={
        "activity_event_id": {"S": malformed}, "transition": {"S": "REDRIVE"}})
    wait_until(lambda: any("needs workflow_exec_id" in r.reason
                           for r in runtime.client.list_rejections()),
               message="a REDRIVE row without workflow_exec_id rejected, saying so")
    assert runtime.client.get_workflow(wx).redrive_count == 1


def test_the_stream_lambda_starts_a_child_run(runtime: LocalRuntime, raw: RawClient) -> None:
    runtime.client.register_workflow(WorkflowDefinition("kid", (
        Act("k", launcher=LauncherSpec.python("wb_data_activities:child_sink")),)))
    runtime.client.register_workflow(WorkflowDefinition("mom", (
        Act("call", launcher=LauncherSpec.workflow("kid")),)))
    request_id = raw.request("mom", {"x": 1})
    wf = wait_workflow(runtime, request_id)
    assert wf.state is W.COMPLETED, wf
    assert wf.activity("call").output == {"k": {"child_input": {"x": 1}, "upstream": {}}}
    child = runtime.client.get_workflow(wf.child_workflow_exec_ids[0])
    assert child.parent_workflow_exec_id == wf.workflow_exec_id
    assert child.state is W.COMPLETED
