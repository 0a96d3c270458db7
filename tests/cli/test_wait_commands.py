"""``signal``, ``approve``, ``reject``, ``suspend``, ``resume`` and how ``status``,
``graph`` and the JSON output show a waiting activity."""

from __future__ import annotations

from cli_helpers import Run

from whimbrel import ActivityDefinition as Act
from whimbrel import LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract.ids import activity_exec_id

ORDER = WorkflowDefinition("order", (
    Act("take"),
    Act("review", ("take",), launcher=LauncherSpec.approval(approvers=["alice"])),
    Act("paid", ("take",), launcher=LauncherSpec.signal("paid", timeout_seconds=3600)),
    Act("ship", ("review", "paid"))))


def _taken(wb: Whimbrel) -> str:
    wb.register_workflow(ORDER)
    wx = wb.start_workflow("order")
    take = activity_exec_id(wx, "take", 1)
    wb.transition_activity(take, "RUNNING")
    wb.transition_activity(take, "COMPLETED")
    return wx


def test_status_graph_and_json_show_what_a_wait_waits_for(run: Run, wb: Whimbrel) -> None:
    wx = _taken(wb)
    status = run("status", wx).stdout
    assert "waits for approval" in status and "waits for signal:paid" in status
    assert "waits for signal:paid" in run("status", wx, "--view", "tree").stdout
    acts = {a["activity_name"]: a for a in run.json("status", wx)["activities"]}
    assert acts["review"]["waiting_for"] == "approval"
    assert acts["paid"]["waiting_for"] == "signal:paid"
    assert acts["ship"]["waiting_for"] is None
    assert "READY · waits for signal:paid" in run("graph", wx).stdout


def test_signal_approve_and_reject(run: Run, wb: Whimbrel) -> None:
    wx = _taken(wb)
    paid = activity_exec_id(wx, "paid", 1)
    out = run.json("signal", wx, "paid", "--payload", '{"eur": 3}', "--signal-id", "s-1")
    assert out == {"workflow_exec_id": wx, "signal": "paid", "signal_id": "s-1",
                   "received_by": paid, "kept": False}
    assert wb.get_activity(paid).output == {"eur": 3}
    assert run.json("signal", wx, "paid", "--payload", '{"eur": 3}',
                    "--signal-id", "s-1")["received_by"] == paid  # counts once
    run("signal", wx, "paid", code=5)  # nothing waits for it any more
    review = activity_exec_id(wx, "review", 1)
    assert "only alice may" in run("approve", review, "--by", "bob", code=5).stderr
    out = run.json("approve", review, "--by", "alice", "--comment", "fine")
    assert out["state"] == "COMPLETED" and out["output"]["comment"] == "fine"
    assert run("reject", review, "--by", "alice", code=5).stderr.startswith("error: state")

    wx2 = _taken(wb)
    result = run("reject", activity_exec_id(wx2, "review", 1), "--by", "alice", "-m", "no")
    assert "FAILED: rejected by alice: no" in result.stdout
    assert wb.get_workflow(wx2).state.value == "FAILED"


def test_a_signal_before_its_wait_is_kept(run: Run, wb: Whimbrel) -> None:
    wb.register_workflow(ORDER)
    wx = wb.start_workflow("order")
    assert "kept: no activity waits for 'paid' yet" in run("signal", wx, "paid").stdout


def test_suspend_and_resume(run: Run, wb: Whimbrel) -> None:
    wx = _taken(wb)
    assert run.json("suspend", wx) == {"workflow_exec_id": wx, "state": "SUSPENDED"}
    assert f"{wx} SUSPENDED" in run("suspend", wx).stdout  # idempotent
    assert "SUSPENDED" in run("status", wx).stdout
    assert run.json("resume", wx) == {"workflow_exec_id": wx, "state": "RUNNING"}
