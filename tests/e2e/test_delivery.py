"""At-least-once delivery: duplicates, partial batch failures, and rejected records."""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter

import boto3
import pytest
import wb_test_activities
from e2e_support import (
    DIAMOND,
    EXTERNAL_DIAMOND,
    RawClient,
    activity_state,
    summary,
    wait_workflow,
)

from whimbrel import ActivityState, StoreError, WorkflowState
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.contract.limits import MAX_INPUT_BYTES
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import wait_until

pytestmark = pytest.mark.slow


class FlakyWrites:
    """A store write hook: every ``every``-th write made by a stream handler fails with
    a retryable error, before or after the write reaches DynamoDB (a crash either side)."""

    def __init__(self, every: int = 4, limit: int = 12) -> None:
        self.every, self.limit = every, limit
        self.count = 0
        self.injected = 0
        self.lock = threading.Lock()

    def __call__(self, phase: str, operation: str, table: str) -> None:
        if not threading.current_thread().name.startswith("whimbrel-stream-"):
            return
        with self.lock:
            self.count += 1
            if self.injected >= self.limit or self.count % self.every:
                return
            if (phase == "after") != (self.injected % 2 == 1):
                return
            self.injected += 1
        raise StoreError(f"injected throttle {phase} {operation} {table}",
                         aws_code="ThrottlingException", retryable=True)


def _run_scenario(rt: LocalRuntime, raw: RawClient) -> tuple[dict[str, object], ...]:
    rt.client.register_workflow(DIAMOND)
    rt.client.register_workflow(EXTERNAL_DIAMOND)
    python_ids = [raw.request("diamond", {"i": i}) for i in range(2)]
    ext_id = raw.request("ext_diamond")
    ext_wx = workflow_exec_id_for(ext_id)
    wait_until(lambda: rt.client.store.get_workflow(ext_wx))
    for name, verb, output in [("A", "RUNNING", None), ("A", "COMPLETED", {"a": 1}),
                               ("B", "RUNNING", None), ("C", "RUNNING", None),
                               ("B", "COMPLETED", {"b": 1}), ("C", "FAILED", None)]:
        aeid = activity_exec_id(ext_wx, name, 1)
        want = "READY" if verb == "RUNNING" else "RUNNING"
        wait_until(lambda a=aeid, w=want: activity_state(rt, a) == w, timeout=10,
                   message=f"{name} never {want}")
        raw.event(aeid, verb, output=output, error="boom" if verb == "FAILED" else None)
    results = [wait_workflow(rt, r, timeout=20) for r in [*python_ids, ext_id]]
    rt.wait_idle()
    return tuple(summary(wf) for wf in results)


def _launch_counts(wxs: set[str]) -> Counter[tuple[str, str]]:
    return Counter((wx, name) for wx, name, what, _ in list(wb_test_activities.EVENTS)
                   if wx in wxs and what == "start")


def test_duplicate_and_retried_deliveries_give_the_same_outcome(
        ddb_endpoint: str, table_prefix: str) -> None:
    outcomes = []
    for mode in ("once", "twice_and_flaky"):
        prefix = f"{table_prefix}{mode[:1]}_"
        flaky = FlakyWrites()
        with LocalRuntime(ddb_endpoint, prefix, heartbeat_rate_seconds=0.2,
                          deliver_twice=mode != "once", lambda_log_level="ERROR") as rt:
            if mode != "once":
                rt.client.store.write_hooks.append(flaky)
            raw = RawClient(ddb_endpoint, prefix)
            outcome = _run_scenario(rt, raw)
            wxs = {a for a in _all_workflow_ids(rt)}
            launches = _launch_counts(wxs)
            assert launches and set(launches.values()) == {1}, launches
            if mode != "once":
                assert flaky.injected > 0
                assert sum(p.stats.retries for p in rt.pumps.values()) > 0
                assert all(p.stats.dead_lettered == 0 for p in rt.pumps.values())
            assert rt.client.list_rejections() == []
            outcomes.append(outcome)
            rt.client.store.delete_tables()
    assert outcomes[0] == outcomes[1]
    states = [o["state"] for o in outcomes[0]]
    assert states == ["COMPLETED", "COMPLETED", "FAILED"]


def _all_workflow_ids(rt: LocalRuntime) -> list[str]:
    page = rt.client.list_workflows(limit=1000)
    assert page.cursor is None
    return [wf.workflow_exec_id for wf in page.items]


# -- rejections ------------------------------------------------------------------------

def test_malformed_records_are_rejected_and_good_ones_still_run(runtime: LocalRuntime,
                                                               raw: RawClient) -> None:
    rt = runtime
    rt.client.register_workflow(DIAMOND)
    rt.client.register_workflow(EXTERNAL_DIAMOND)
    ddb = boto3.client("dynamodb", endpoint_url=rt.endpoint_url, region_name="us-east-1")

    def req(**attrs: dict[str, object]) -> dict[str, object]:
        return {"PutRequest": {"Item": {"workflow_request_id": {"S": str(uuid.uuid4())},
                                        **attrs}}}

    good1, good2 = req(workflow_name={"S": "diamond"}), req(workflow_name={"S": "diamond"})
    batch = [
        req(),  # missing workflow_name
        good1,
        req(workflow_name={"N": "7"}),  # wrong type
        req(workflow_name={"S": "no_such_workflow"}),
        req(workflow_name={"S": "diamond"}, input={"S": json.dumps("x" * MAX_INPUT_BYTES)}),
        req(workflow_name={"S": "diamond"}, input={"S": "{not json"}),
        req(workflow_name={"S": "diamond"}, manual={"S": "false"}),  # wrong type
        good2,
    ]
    ddb.batch_write_item(RequestItems={f"{rt.table_prefix}workflow_request": batch})
    good_after = raw.request("diamond")

    for item in (good1, good2):
        rid = item["PutRequest"]["Item"]["workflow_request_id"]["S"]  # type: ignore[index]
        assert wait_workflow(rt, rid).state is WorkflowState.COMPLETED
    assert wait_workflow(rt, good_after).state is WorkflowState.COMPLETED

    reasons = wait_until(lambda: _reasons(rt, "workflow_request", 6), timeout=10)
    assert any("workflow_name: Field required" in r for r in reasons), reasons
    assert any("workflow_name: Input should be a valid string" in r for r in reasons)
    assert any("no registered workflow definition 'no_such_workflow'" in r for r in reasons)
    assert any("more than the limit" in r for r in reasons)
    assert any("input is a string but not JSON" in r for r in reasons)
    assert any("manual: Input should be a valid boolean" in r for r in reasons)

    # Events: a workflow with external activities to aim at.
    ext_rid = raw.request("ext_diamond")
    wx = workflow_exec_id_for(ext_rid)
    a_id = activity_exec_id(wx, "A", 1)
    wait_until(lambda: rt.client.store.get_activity(a_id) is not None
               and rt.client.get_activity(a_id).state is ActivityState.READY)

    def ev(**attrs: dict[str, object]) -> dict[str, object]:
        return {"PutRequest": {"Item": {"activity_event_id": {"S": str(uuid.uuid4())},
                                        **attrs}}}

    events = [
        ev(activity_exec_id={"S": a_id}),  # missing transition
        ev(activity_exec_id={"S": a_id}, transition={"S": "JUMP"}),
        ev(activity_exec_id={"S": f"{wx}:nope:1"}, transition={"S": "RUNNING"}),
        ev(activity_exec_id={"S": "not-an-id"}, transition={"S": "RUNNING"}),
        ev(activity_exec_id={"S": a_id}, transition={"S": "READY"}),  # already READY
        ev(activity_exec_id={"S": a_id}, transition={"S": "TIME_OUT"}),
        ev(activity_exec_id={"S": a_id}, transition={"S": "RUNNING"}),  # good
    ]
    ddb.batch_write_item(RequestItems={f"{rt.table_prefix}activity_event": events})
    wait_until(lambda: rt.client.get_activity(a_id).state is ActivityState.RUNNING)
    raw.event(a_id, "COMPLETED", output={"fine": True})  # good, after the bad batch
    wait_until(lambda: rt.client.get_activity(a_id).state is ActivityState.COMPLETED)

    reasons = wait_until(lambda: _reasons(rt, "activity_event", 6), timeout=10)
    assert any("transition: Field required" in r for r in reasons), reasons
    assert any("transition: Input should be 'CANCEL'" in r for r in reasons)
    assert any(f"no activity execution '{wx}:nope:1'" in r for r in reasons)
    assert any("not of the form" in r for r in reasons)
    assert any("move READY needs REQUESTED but it is READY" in r for r in reasons)
    assert any("only by the heartbeat listener" in r for r in reasons)
    rows = rt.client.list_rejections()
    # Each row keeps the stream record (cut when huge, like the oversized input).
    assert all(r.record["eventSource"] == "aws:dynamodb" for r in rows
               if isinstance(r.record, dict))
    assert sum(isinstance(r.record, dict) for r in rows) == len(rows) - 1
    assert all(p.stats.dead_lettered == 0 for p in rt.pumps.values())


def _reasons(rt: LocalRuntime, source: str, n: int) -> list[str] | None:
    found = [r.reason for r in rt.client.list_rejections() if r.source == source]
    return found if len(found) >= n else None
