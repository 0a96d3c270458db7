"""Handlers fed with Lambda-shaped DynamoDB-stream events (JSON fixtures), on DynamoDB Local."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState, StoreError, Whimbrel, WorkflowDefinition, WorkflowState
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.contract.schedules import fire_request_id
from whimbrel.engine.engine import IN_FLIGHT_GRACE_SECONDS
from whimbrel.local.runtime import LambdaContext

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # lambdas/ sits next to whimbrel/ in the checkout
    sys.path.append(str(ROOT))

from lambdas import _shared, activity_event, heartbeat, workflow_request  # noqa: E402

EVENTS = Path(__file__).parent / "lambda_events"


def load(name: str, **subst: str) -> dict[str, Any]:
    text = (EVENTS / name).read_text()
    for key, value in subst.items():
        text = text.replace("{" + key + "}", value)
    data: dict[str, Any] = json.loads(text)
    return data


@pytest.fixture
def wb(monkeypatch: pytest.MonkeyPatch, ddb_endpoint: str,
       table_prefix: str) -> Iterator[Whimbrel]:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    client = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix, actor="lambda")
    client.create_tables()
    client.register_workflow(WorkflowDefinition("unit_wf", (
        Act("first"), Act("second", ("first",)))))
    yield client
    client.close()
    client.store.delete_tables()


def ctx(wb: Whimbrel) -> LambdaContext:
    return LambdaContext("unit", wb)


def test_workflow_request_batch(wb: Whimbrel) -> None:
    event = load("workflow_request_batch.json")
    failed: list[str] = []

    def hook(phase: str, operation: str, table: str) -> None:
        # Fail the third record's create once with a retryable error. The batch's records are
        # handled at the same time: the hook knows the record from the log context of
        # the thread handling it.
        keys = _shared.logger.thread_safe_get_current_keys()
        if (table == "workflow_exec" and phase == "before"
                and keys.get("workflow_request_id") == "req-throttled" and not failed):
            failed.append(operation)
            raise StoreError("throttled", aws_code="ThrottlingException", retryable=True)

    wb.store.write_hooks.append(hook)
    response = workflow_request.handler(event, ctx(wb))
    assert response == {"batchItemFailures": [
        {"itemIdentifier": "4421584500000000017450439093"}]}

    wf = wb.get_workflow(workflow_exec_id_for("req-good-1"))
    assert wf.state is WorkflowState.RUNNING and wf.input == {"n": 1, "tags": ["a"]}
    rejected = {r.record["eventID"]: r for r in wb.list_rejections(day="2025-01-01")}
    assert [r.source for r in rejected.values()] == ["workflow_request"] * 2
    assert "workflow_name: Field required" in \
        rejected["c81e728d9d4c2f636f067f89cc14862c"].reason
    # The last record writes req-good-1 again (a MODIFY): rejected as a re-used id that
    # names the run it belongs to; the run keeps the input that started it.
    reused = rejected["a87ff679a2f3e71d9181a67b7542122c"]
    assert reused.error_type == "ReusedId"
    assert "written again" in reused.reason and wf.workflow_exec_id in reused.reason

    # Lambda retries from the failed record: now it starts, and a replay of the good
    # one is a no-op (same execution, no second rejection).
    retry = {"Records": event["Records"][2:]}
    assert workflow_request.handler(retry, ctx(wb)) == {"batchItemFailures": []}
    assert wb.get_workflow(workflow_exec_id_for("req-throttled")).input == {"n": 3}
    assert workflow_request.handler({"Records": event["Records"][:2]}, ctx(wb)) == {
        "batchItemFailures": []}
    assert len(wb.list_rejections(day="2025-01-01")) == 2


def test_activity_event_batch(wb: Whimbrel) -> None:
    wx = wb.start_workflow("unit_wf", request_id="r1")
    aeid = activity_exec_id(wx, "first", 1)
    event = load("activity_event_batch.json", ACTIVITY=aeid)
    assert activity_event.handler(event, ctx(wb)) == {"batchItemFailures": []}
    first = wb.get_activity(aeid)
    assert first.state is ActivityState.COMPLETED and first.output == {"rows": 42}
    assert wb.get_activity(activity_exec_id(wx, "second", 1)).state is ActivityState.READY
    assert any("transition" in r.reason for r in wb.list_rejections(day="2025-01-01"))

    # The whole batch delivered again: nothing moves, nothing new is rejected.
    before = len(wb.list_rejections(day="2025-01-01"))
    assert activity_event.handler(event, ctx(wb)) == {"batchItemFailures": []}
    assert len(wb.list_rejections(day="2025-01-01")) == before
    assert [h.state for h in wb.get_activity(aeid).history].count("COMPLETED") == 1


def test_heartbeat_handler_times_out_silent_activities(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("hb_wf", (Act("a", heartbeat_timeout_seconds=1),)))
    wx = wb.start_workflow("hb_wf")
    aeid = activity_exec_id(wx, "a", 1)
    wb.transition_activity(aeid, "RUNNING")
    clock_now = time.time() + 5 + IN_FLIGHT_GRACE_SECONDS  # past deadline and grace
    wb.engine.clock = lambda: clock_now
    report = heartbeat.handler({"source": "aws.events"}, ctx(wb))
    assert report["timed_out"] == [aeid]
    assert wb.get_workflow(wx).state is WorkflowState.FAILED


def test_heartbeat_handler_fires_due_schedules(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("hb_sched", (Act("a"),)))
    base = float(int(time.time()) // 60 * 60)
    wb.engine.clock = lambda: base + 10
    wb.create_schedule("hb-every", "hb_sched", every_seconds=60)
    wb.engine.clock = lambda: base + 60
    for _ in range(2):  # the deployed sweep, and the same pass again: one run
        heartbeat.handler({"source": "aws.events"}, ctx(wb))
    runs = wb.list_workflows(name="hb_sched").items
    assert [r.workflow_request_id for r in runs] == [fire_request_id("hb-every", base + 60)]
