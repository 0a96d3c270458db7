"""Issue 3 end-to-end: the Simple Lambda API through the local runtime's real streams."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from e2e_support import (
    DIAMOND,
    EXTERNAL_DIAMOND,
    RawClient,
    activity_state,
    summary,
    wait_workflow,
)

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState, LauncherSpec, WorkflowDefinition, WorkflowState
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import wait_until

pytestmark = pytest.mark.slow


def test_raw_put_item_request_runs_a_python_diamond(runtime: LocalRuntime,
                                                    raw: RawClient) -> None:
    runtime.client.register_workflow(DIAMOND)
    request_id = raw.request("diamond", {"x": 1})
    wf = wait_workflow(runtime, request_id)
    assert wf.state is WorkflowState.COMPLETED, wf
    assert [a.state for a in wf.activities] == [ActivityState.COMPLETED] * 4
    assert wf.input == {"x": 1}
    assert wf.activity("D").output == {"name": "D", "upstream": ["B", "C"]}


def test_manual_requests_are_left_to_the_full_logic_api(runtime: LocalRuntime,
                                                        raw: RawClient) -> None:
    runtime.client.register_workflow(DIAMOND)
    manual = raw.request("diamond", manual={"BOOL": True})
    later = raw.request("diamond")
    assert wait_workflow(runtime, later).state is WorkflowState.COMPLETED
    runtime.wait_idle()
    assert runtime.client.store.get_workflow(workflow_exec_id_for(manual)) is None


def test_client_request_workflow_writes_one_item(runtime: LocalRuntime) -> None:
    runtime.client.register_workflow(DIAMOND)
    request_id = runtime.client.request_workflow("diamond", {"y": 2}, source="test")
    row = runtime.client.store.cold.get_request(request_id)
    assert row is not None and row.manual is False and row.workflow_name == "diamond"
    assert wait_workflow(runtime, request_id).state is WorkflowState.COMPLETED


# -- external activities: raw events vs the Full Logic API ----------------------------

Send = Callable[[str, str, Any, str | None], None]

SCENARIOS: dict[str, list[tuple[str, str, Any, str | None]]] = {
    "all_complete": [
        ("A", "RUNNING", None, None), ("A", "COMPLETED", {"a": 1}, None),
        ("B", "RUNNING", None, None), ("C", "RUNNING", None, None),
        ("C", "COMPLETED", {"c": [1, 2]}, None), ("B", "COMPLETED", {"b": "x"}, None),
        ("D", "RUNNING", None, None), ("D", "COMPLETED", {"d": 1.5}, None),
    ],
    "one_fails": [
        ("A", "RUNNING", None, None), ("A", "COMPLETED", {"a": 1}, None),
        ("B", "RUNNING", None, None), ("C", "RUNNING", None, None),
        ("B", "FAILED", None, "disk full"), ("C", "COMPLETED", {"c": 2}, None),
    ],
}

_TARGET = {"RUNNING": ActivityState.RUNNING, "COMPLETED": ActivityState.COMPLETED,
           "FAILED": ActivityState.FAILED}


def _drive(rt: LocalRuntime, wx: str, steps: list[tuple[str, str, Any, str | None]],
           send: Send) -> None:
    for name, verb, output, error in steps:
        aeid = activity_exec_id(wx, name, 1)
        if verb == "RUNNING":
            wait_until(lambda a=aeid: activity_state(rt, a) == "READY",
                       message=f"{name} never READY")
        send(aeid, verb, output, error)
        wait_until(lambda a=aeid, v=verb: rt.client.get_activity(a).state is _TARGET[v],
                   message=f"{name} never {verb}")


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_external_activities_driven_by_raw_events_match_full_logic(
        runtime: LocalRuntime, raw: RawClient, scenario: str) -> None:
    runtime.client.register_workflow(EXTERNAL_DIAMOND)
    steps = SCENARIOS[scenario]

    full_wx = runtime.client.start_workflow("ext_diamond", {"n": 1})

    def full(aeid: str, verb: str, output: Any, error: str | None) -> None:
        runtime.client.transition_activity(aeid, verb, output=output, error=error)

    _drive(runtime, full_wx, steps, full)
    full_wf = runtime.client.wait(full_wx, timeout=15)

    request_id = raw.request("ext_diamond", {"n": 1})
    raw_wx = workflow_exec_id_for(request_id)
    wait_until(lambda: runtime.client.store.get_workflow(raw_wx))
    flip = iter(range(1000))

    def simple(aeid: str, verb: str, output: Any, error: str | None) -> None:
        # Alternate JSON-string and native-map outputs: both are valid item formats.
        raw.event(aeid, verb, output=output, error=error, native_output=next(flip) % 2 == 0)

    _drive(runtime, raw_wx, steps, simple)
    raw_wf = wait_workflow(runtime, request_id)

    assert summary(raw_wf) == summary(full_wf)
    expected = WorkflowState.COMPLETED if scenario == "all_complete" else WorkflowState.FAILED
    assert raw_wf.state is expected
    if scenario == "one_fails":
        assert raw_wf.activity("B").error == "disk full"
        assert raw_wf.activity("D").state is ActivityState.CANCELLED


def test_send_activity_event_drives_an_external_activity(runtime: LocalRuntime) -> None:
    defn = WorkflowDefinition("single_ext", (Act("only"),))
    runtime.client.register_workflow(defn)
    wx = runtime.client.start_workflow("single_ext")
    aeid = activity_exec_id(wx, "only", 1)
    wait_until(lambda: runtime.client.get_activity(aeid).state is ActivityState.READY)
    runtime.client.send_activity_event(aeid, "RUNNING")
    wait_until(lambda: runtime.client.get_activity(aeid).state is ActivityState.RUNNING)
    runtime.client.send_activity_event(aeid, "COMPLETED", output={"ok": True})
    wf = runtime.client.wait(wx, timeout=10)
    assert wf.state is WorkflowState.COMPLETED and wf.activity("only").output == {"ok": True}


# -- heartbeat listener ------------------------------------------------------------------

def test_silent_activity_is_timed_out_and_the_workflow_fails(runtime: LocalRuntime,
                                                             raw: RawClient) -> None:
    defn = WorkflowDefinition("silent", (
        Act("quiet", heartbeat_timeout_seconds=0.5),
        Act("fine", launcher=LauncherSpec.python("wb_test_activities:echo")),
    ))
    runtime.client.register_workflow(defn)
    request_id = raw.request("silent")
    wx = workflow_exec_id_for(request_id)
    aeid = activity_exec_id(wx, "quiet", 1)
    wait_until(lambda: runtime.client.store.get_activity(aeid) is not None
               and runtime.client.get_activity(aeid).state is ActivityState.READY)
    raw.event(aeid, "RUNNING")  # ... and then never a heartbeat
    wf = wait_workflow(runtime, request_id, timeout=30)  # 0.5 s + the in-flight grace
    assert wf.state is WorkflowState.FAILED
    quiet = wf.activity("quiet")
    assert quiet.state is ActivityState.TIMED_OUT
    assert "no heartbeat" in (quiet.error or "")
    assert any(h.by == "heartbeat-listener" for h in quiet.history)
    assert wf.activity("fine").state is ActivityState.COMPLETED

    # A late result never changes TIMED_OUT; it is kept as late output (issue 20).
    raw.event(aeid, "COMPLETED", output={"late": True})
    wait_until(lambda: runtime.client.get_activity(aeid).late_output == {"late": True})
    assert runtime.client.get_activity(aeid).state is ActivityState.TIMED_OUT


# test_heartbeats_through_the_full_logic_api_keep_an_activity_alive was removed (issue 20):
# it raced a 0.6 s real-time heartbeat timeout and failed under load. Its deterministic
# replacement, on an injected clock, is tests/e2e/test_i20_rows.py::
# test_heartbeats_keep_an_activity_alive_on_an_injected_clock.
