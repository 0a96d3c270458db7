"""Waits through the Simple API (issue 13): SIGNAL, APPROVE, REJECT, SUSPEND and RESUME
rows written with a raw ``PutItem``, handled by the local runtime's real streams. Bad rows
become rejection rows and change nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from e2e_support import RawClient, event_row, rejection_about

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState as A
from whimbrel import LauncherSpec, WorkflowDefinition
from whimbrel import WorkflowState as W
from whimbrel.contract.ids import activity_exec_id
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import wait_until

pytestmark = pytest.mark.slow

SHOP = WorkflowDefinition("waiting_shop", (
    Act("order"),
    Act("gate", ("order",), launcher=LauncherSpec.approval(approvers=["alice"])),
    Act("pay", ("order",), launcher=LauncherSpec.signal("paid")),
    Act("ship", ("gate", "pay"))))


def put(raw: RawClient, transition: str, **attrs: Any) -> str:
    return raw.row(transition, **attrs)


def state_of(rt: LocalRuntime, aeid: str) -> A:
    return rt.client.get_activity(aeid).state


def test_wait_rows_drive_a_run(runtime: LocalRuntime, raw: RawClient) -> None:
    rt = runtime
    rt.client.register_workflow(SHOP)
    wx = rt.client.start_workflow("waiting_shop")
    order, gate, pay = (activity_exec_id(wx, n, 1) for n in ("order", "gate", "pay"))
    # A signal before its wait is READY is kept.
    early = put(raw, "SIGNAL", workflow_exec_id=wx, signal="paid",
                payload={"S": json.dumps({"eur": 12})})
    row = event_row(rt, early)
    assert (row["outcome"]["S"], row["result_state"]["S"]) == ("APPLIED", "KEPT")
    put(raw, "RUNNING", activity_exec_id=order)
    put(raw, "COMPLETED", activity_exec_id=order)
    wait_until(lambda: state_of(rt, pay) is A.COMPLETED, timeout=15)
    assert rt.client.get_activity(pay).output == {"eur": 12}
    # The same row content under a new id, with the first row's id as signal_id: once.
    again = put(raw, "SIGNAL", workflow_exec_id=wx, signal="paid", signal_id=early,
                payload={"S": json.dumps({"eur": 12})})
    assert event_row(rt, again)["outcome"]["S"] == "DUPLICATE"
    # Only alice decides; a stranger's row is rejected and changes nothing.
    stranger = put(raw, "APPROVE", activity_exec_id=gate, by="mallory")
    assert rejection_about(rt, stranger).error_type == "NotAnApprover"
    assert state_of(rt, gate) is A.READY
    # Suspended: the decision is recorded, ship waits READY and cannot be claimed.
    suspended = put(raw, "SUSPEND", workflow_exec_id=wx)
    assert event_row(rt, suspended)["result_state"]["S"] == "SUSPENDED"
    approved = put(raw, "APPROVE", activity_exec_id=gate, by="alice", comment="ok")
    assert event_row(rt, approved)["result_state"]["S"] == "COMPLETED"
    assert rt.client.get_activity(gate).output["by"] == "alice"
    assert rt.client.get_workflow(wx).activity("ship").state is A.READY
    assert rt.client.claim(workflow_name="waiting_shop") is None
    resumed = put(raw, "RESUME", workflow_exec_id=wx)
    assert event_row(rt, resumed)["result_state"]["S"] == "RUNNING"
    ship = rt.client.claim(workflow_name="waiting_shop")
    assert ship is not None and ship.activity_name == "ship"
    rt.client.transition_activity(ship.activity_exec_id, "COMPLETED")
    assert rt.client.get_workflow(wx).state is W.COMPLETED


def test_a_reject_row_fails_the_run(runtime: LocalRuntime, raw: RawClient) -> None:
    runtime.client.register_workflow(SHOP)
    wx = runtime.client.start_workflow("waiting_shop")
    order, gate = activity_exec_id(wx, "order", 1), activity_exec_id(wx, "gate", 1)
    put(raw, "RUNNING", activity_exec_id=order)
    put(raw, "COMPLETED", activity_exec_id=order)
    wait_until(lambda: state_of(runtime, gate) is A.READY, timeout=15)
    rejected = put(raw, "REJECT", activity_exec_id=gate, by="alice", comment="no stock")
    assert event_row(runtime, rejected)["result_state"]["S"] == "FAILED"
    wf = runtime.client.get_workflow(wx)
    assert wf.state is W.FAILED and "rejected by alice: no stock" in (wf.error or "")


@pytest.mark.parametrize(("attrs", "needle"), [
    ({"transition": "SIGNAL", "signal": "paid"}, "needs workflow_exec_id"),
    ({"transition": "SIGNAL", "workflow_exec_id": "WX"}, "needs signal"),
    ({"transition": "SIGNAL", "workflow_exec_id": "WX", "signal": "refund"},
     "waits for signal 'refund'"),
    ({"transition": "SIGNAL", "workflow_exec_id": "WX", "signal": "paid",
      "activity_exec_id": "WX:pay:1"}, "addresses a workflow"),
    ({"transition": "SIGNAL", "workflow_exec_id": "WX", "signal": "paid",
      "payload": {"S": "{not json"}}, "payload is a string but not JSON"),
    ({"transition": "APPROVE", "activity_exec_id": "WX:gate:1"}, "by must name"),
    ({"transition": "REJECT", "activity_exec_id": "WX:order:1", "by": "alice"},
     "not an approval"),
    ({"transition": "APPROVE", "by": "alice"}, "needs activity_exec_id"),
    ({"transition": "RESUME", "workflow_exec_id": "no-such-run"}, "no workflow execution"),
    ({"transition": "SUSPEND", "workflow_exec_id": "no-such-run"}, "no workflow execution"),
    ({"transition": "RUNNING", "activity_exec_id": "WX:pay:1"}, "ends only by a signal"),
])
def test_bad_wait_rows_are_rejected(runtime: LocalRuntime, raw: RawClient,
                                    attrs: dict[str, Any], needle: str) -> None:
    runtime.client.register_workflow(SHOP)
    wx = runtime.client.start_workflow("waiting_shop")
    before = runtime.client.get_workflow(wx)
    fields = {k: (v.replace("WX", wx) if isinstance(v, str) else v)
              for k, v in attrs.items() if k != "transition"}
    if "pay" in fields.get("activity_exec_id", "") and attrs["transition"] == "RUNNING":
        put(raw, "RUNNING", activity_exec_id=activity_exec_id(wx, "order", 1))
        put(raw, "COMPLETED", activity_exec_id=activity_exec_id(wx, "order", 1))
        wait_until(lambda: state_of(runtime, activity_exec_id(wx, "pay", 1)) is A.READY)
        before = runtime.client.get_workflow(wx)
    bad = put(raw, attrs["transition"], **fields)
    rejection = rejection_about(runtime, bad)
    assert needle in rejection.reason, rejection.reason
    assert event_row(runtime, bad)["outcome"]["S"] == "REJECTED"
    assert runtime.client.get_workflow(wx) == before
    assert runtime.client.store.signals.list_signals(wx) == []
