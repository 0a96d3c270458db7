"""Issue 20, decision 1 through the path the finding used: raw PutItem rows with native
DynamoDB types (docs/simple-api.md allows them), the real stream handlers of the local
runtime, and the heartbeat listener's sweep.

A request row whose ``input`` is a native map starts a run that can end; the docs' own
COMPLETED example (``"output": {"M": {"rows": {"N": "42"}}}``) is applied and its row
marked, never dead-lettered; and one sweep pass times out another run past its
``timeout_seconds`` whatever that first run does. Written to fail on the main of the day
the issue was filed.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
from e2e_support import RawClient, activity_state, event_row

from whimbrel import ActivityDefinition as Act
from whimbrel import LauncherSpec, WorkflowDefinition, WorkflowState
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import StepClock, wait_until

pytestmark = pytest.mark.slow
W = WorkflowState
EXT = LauncherSpec.external()
LONG = 2 * 3600.0


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


@pytest.fixture
def still(ddb_endpoint: str, table_prefix: str, clock: StepClock) -> Iterator[LocalRuntime]:
    """The local runtime with a clock that stands still and no scheduled sweep: the test
    runs each pass itself."""
    with LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0, clock=clock,
                      lambda_log_level="WARNING") as rt:
        yield rt
        rt.client.store.delete_tables()


def _native_request(raw: RawClient, workflow_name: str, native_input: dict[str, object]) -> str:
    request_id = str(uuid.uuid4())
    raw.ddb.put_item(TableName=f"{raw.prefix}workflow_request", Item={
        "workflow_request_id": {"S": request_id}, "workflow_name": {"S": workflow_name},
        "when_epoch": {"N": str(time.time())}, "input": native_input})
    return request_id


def test_a_native_map_request_runs_to_its_end_and_the_sweep_goes_on(
        still: LocalRuntime, raw: RawClient, clock: StepClock) -> None:
    """Findings: the run never ended (its end read the request's ``input`` as a string and
    raised), every later sweep pass raised on it, and a run with ``timeout_seconds: 3``
    was still RUNNING 40 s later; the docs' native COMPLETED row was dead-lettered."""
    rt = still
    rt.client.register_workflow(WorkflowDefinition("i20_native", (Act("w", launcher=EXT),)))
    rt.client.register_workflow(WorkflowDefinition("i20_timed", (Act("w", launcher=EXT),),
                                                   timeout_seconds=3))
    rid = _native_request(raw, "i20_native", {"M": {"rows": {"N": "42"}}})
    wx = workflow_exec_id_for(rid)
    aeid = activity_exec_id(wx, "w", 1)
    wait_until(lambda: activity_state(rt, aeid) == "READY", timeout=30,
               message="the native-map request started no run")
    assert rt.client.get_workflow(wx).input == {"rows": 42}
    timed = rt.client.start_workflow("i20_timed")

    # The docs' COMPLETED example, as written: a native map output.
    done = raw.row("COMPLETED", activity_exec_id=aeid,
                   output={"M": {"rows": {"N": "42"}}})
    wait_until(lambda: activity_state(rt, aeid) == "COMPLETED", timeout=30,
               message="the native COMPLETED row was not applied")
    assert rt.client.get_activity(aeid).output == {"rows": 42}

    # The next sweep pass visits both runs; neither stops it.
    clock.advance(LONG)
    report = rt.client.sweep()
    assert timed in report.workflows_timed_out, report
    assert rt.client.get_workflow(timed).state is W.TIMED_OUT

    def ended() -> bool:
        rt.client.sweep()
        return rt.client.get_workflow(wx).state is W.COMPLETED
    wait_until(ended, timeout=30, message=lambda: f"the native run is still "
               f"{rt.client.get_workflow(wx).state.value}")
    # The row says what became of it (its marking must not fail on the native output).
    row = event_row(rt, done)
    assert row["outcome"]["S"] == "APPLIED", row
    request = rt.client.get_request(rid)
    assert request is not None and request.workflow_exec_id == wx
    rt.wait_idle(timeout=30)
    for pump in rt.pumps.values():
        assert pump.stats.dead_lettered == 0, pump.consumer.name
    dead = [r for r in rt.client.list_rejections() if r.source == "dead_letter"]
    assert dead == [], [json.dumps(r.record, default=str)[:200] for r in dead]
