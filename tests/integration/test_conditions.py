"""Conditions, inputs from data and ending early (issue 22) on DynamoDB Local, through
the Python API."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import wb_flow_activities  # noqa: F401  (the activities below import it by name)

from whimbrel import (
    ActivityCancelled,
    ActivityState,
    IllegalTransition,
    InvalidDefinition,
    LauncherSpec,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel import ActivityDefinition as Act
from whimbrel.contract.ids import activity_exec_id
from whimbrel.engine.conditions import CONDITION_ERROR
from whimbrel.engine.intake import Intake, Outcome
from whimbrel.testing import assert_contract_holds, wait_until

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

A, W = ActivityState, WorkflowState
py = LauncherSpec.python
M = "wb_flow_activities"


def branches(name: str = "pay") -> WorkflowDefinition:
    return WorkflowDefinition(name, (
        Act("charge", launcher=py(f"{M}:charge")),
        Act("refund", ("charge",), launcher=py(f"{M}:echo"),
            when="charge.status == 'declined'",
            input_from={"charge_id": "charge.id", "currency": "input.currency"}),
        Act("ship", ("charge",), launcher=py(f"{M}:echo"),
            when="charge.status != 'declined'"),
        Act("receipt", ("refund", "ship"), launcher=py(f"{M}:echo"),
            trigger="none_failed"),
    ))


@pytest.mark.parametrize(("status", "ran", "skipped"),
                         [("declined", "refund", "ship"), ("ok", "ship", "refund")])
def test_if_else_branches_join(wb: Whimbrel, status: str, ran: str, skipped: str) -> None:
    defn = branches()
    wb.register_workflow(defn)
    wf = wb.wait(wb.start_workflow("pay", {"status": status, "currency": "EUR"}), timeout=30)
    assert wf.state is W.COMPLETED, wf
    assert wf.activity(ran).state is A.COMPLETED
    assert wf.activity(skipped).state is A.SKIPPED
    assert [h.state for h in wf.activity(skipped).history] == ["REQUESTED", "SKIPPED"]
    receipt = wf.activity("receipt")
    assert receipt.state is A.COMPLETED
    assert receipt.output["upstream"][skipped] is None  # a SKIPPED upstream reads null
    assert receipt.output["upstream"][ran]["upstream"]["charge"]["status"] == status
    if ran == "refund":  # input_from: built from the charge's output and the run's input
        assert wf.activity("refund").output["input"] == {
            "status": "declined", "currency": "EUR", "charge_id": "ch_1"}
    assert_contract_holds(wf, defn)


def test_a_skip_propagates_under_all_completed_and_the_run_completes(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("chain", (
        Act("gate", launcher=py(f"{M}:echo"), when="input.go"),
        Act("next", ("gate",), launcher=py(f"{M}:echo")),
        Act("last", ("next",), launcher=py(f"{M}:echo")),
        Act("side", launcher=py(f"{M}:echo")),
    ))
    wb.register_workflow(defn)
    wf = wb.wait(wb.start_workflow("chain", {"go": False}), timeout=30)
    assert wf.state is W.COMPLETED, wf
    assert {a.activity_name: a.state for a in wf.activities} == {
        "gate": A.SKIPPED, "next": A.SKIPPED, "last": A.SKIPPED, "side": A.COMPLETED}
    assert_contract_holds(wf, defn)
    ran = wb.wait(wb.start_workflow("chain", {"go": True}), timeout=30)
    assert {a.state for a in ran.activities} == {A.COMPLETED}


def test_all_skipped_upstreams_skip_a_none_failed_join(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("none", (
        Act("a", launcher=py(f"{M}:echo")),
        Act("b", ("a",), launcher=py(f"{M}:echo"), when="input.x"),
        Act("c", ("a",), launcher=py(f"{M}:echo"), when="input.x"),
        Act("join", ("b", "c"), launcher=py(f"{M}:echo"), trigger="none_failed"),
    ))
    wb.register_workflow(defn)
    wf = wb.wait(wb.start_workflow("none", {}), timeout=30)
    assert wf.state is W.COMPLETED
    assert wf.activity("join").state is A.SKIPPED
    assert_contract_holds(wf, defn)


def test_a_when_that_fails_at_run_time_fails_the_attempt(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("typed", (
        Act("a", launcher=py(f"{M}:echo")),
        Act("b", ("a",), launcher=py(f"{M}:echo"), when="length(input.n) > `1`"),
    ))
    wb.register_workflow(defn)
    wf = wb.wait(wb.start_workflow("typed", {"n": 5}), timeout=30)
    assert wf.state is W.FAILED
    b = wf.activity("b")
    assert b.state is A.FAILED and b.error_type == CONDITION_ERROR
    assert "length" in (b.error or "")
    assert_contract_holds(wf, defn)


def test_a_bad_when_is_refused_at_registration_with_its_position(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("bad", (
        Act("a", launcher=py(f"{M}:echo")),
        Act("b", ("a",), launcher=py(f"{M}:echo"), when="a.status == == 'x'"),
    ))
    with pytest.raises(InvalidDefinition, match="position 12"):
        wb.register_workflow(defn)
    assert wb.list_definitions("bad") == []


def test_skip_is_the_engines_move(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("ext", (Act("a"), Act("b", ("a",))))
    wb.register_workflow(defn)
    wx = wb.start_workflow("ext")
    with pytest.raises(IllegalTransition, match="only by the engine"):
        wb.transition_activity(activity_exec_id(wx, "a", 1), Transition.SKIP)
    assert wb.get_activity(activity_exec_id(wx, "a", 1)).state is A.READY


def test_end_workflow_completes_the_run_with_its_output(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("early", (
        Act("slow"),                                       # external, claimed: running
        Act("idle"),                                       # external, never claimed
        Act("gate"),
        Act("ender", ("gate",), launcher=py(f"{M}:finish_now")),
        Act("after", ("ender",), launcher=py(f"{M}:echo")),
        Act("join", ("after", "slow"), launcher=py(f"{M}:echo")),
    ))
    wb.register_workflow(defn)
    wx = wb.start_workflow("early")
    slow = wb.claim(workflow_name="early", activity_name="slow")
    assert slow is not None
    gate = activity_exec_id(wx, "gate", 1)
    wb.transition_activity(gate, Transition.RUNNING)
    wb.transition_activity(gate, Transition.COMPLETED)
    wb.wait(wx, timeout=30)
    # The run's terminal write comes first, then its follow-ups skip and stop the rest.
    expected = {"slow": A.CANCELLED_RUNNING, "idle": A.SKIPPED, "gate": A.COMPLETED,
                "ender": A.COMPLETED, "after": A.SKIPPED, "join": A.SKIPPED}
    wait_until(lambda: {a.activity_name: a.state for a in wb.get_workflow(wx).activities}
               == expected, timeout=30)
    wf = wb.get_workflow(wx)
    assert wf.state is W.COMPLETED, wf
    assert wf.output == {"answer": 42, "from": "ender"}
    assert wf.ended_by == activity_exec_id(wx, "ender", 1)
    assert wf.activity("ender").output == {"answer": 42, "from": "ender"}
    # The running one learns it as from a cancel: its heartbeat says stop.
    with pytest.raises(ActivityCancelled):
        wb.heartbeat(slow.activity_exec_id)
    wb.transition_activity(slow.activity_exec_id, Transition.COMPLETED)
    wf = wb.get_workflow(wx)
    assert wf.activity("slow").state is A.CANCELLED and wf.state is W.COMPLETED
    assert_contract_holds(wf, defn)


# -- the END_WORKFLOW row, through the real intake (redelivered) ----------------------------

def _row(aeid: str, verb: str, output: str | None = None) -> dict[str, Any]:
    image: dict[str, Any] = {"activity_event_id": {"S": str(uuid.uuid4())},
                             "activity_exec_id": {"S": aeid}, "transition": {"S": verb},
                             "when_epoch": {"N": "1700000000"}}
    if output is not None:
        image["output"] = {"S": output}
    return {"eventName": "INSERT", "eventID": str(uuid.uuid4()),
            "dynamodb": {"NewImage": image}}


def test_an_end_workflow_row_applies_once_under_redelivery(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("rowend", (Act("a"), Act("b"), Act("c", ("a",))))
    wb.register_workflow(defn)
    wx = wb.start_workflow("rowend")
    a = activity_exec_id(wx, "a", 1)
    intake = Intake(wb.engine)
    assert intake.activity_event(_row(a, "RUNNING")).outcome is Outcome.APPLIED
    row = _row(a, "END_WORKFLOW", '{"done": true}')
    first = intake.activity_event(row)
    assert (first.outcome, first.new_state) == (Outcome.APPLIED, "COMPLETED")
    again = intake.activity_event(row)
    assert again.outcome is Outcome.DUPLICATE
    wf = wb.get_workflow(wx)
    assert wf.state is W.COMPLETED and wf.output == {"done": True}
    assert {x.activity_name: x.state for x in wf.activities} == {
        "a": A.COMPLETED, "b": A.SKIPPED, "c": A.SKIPPED}
    ended = [h for h in wf.history if h.state == "COMPLETED"]
    assert len(ended) == 1
    assert_contract_holds(wf, defn)


def test_bad_end_workflow_and_skip_rows_are_refused_and_change_nothing(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("rowbad", (Act("a"), Act("b", ("a",)))))
    wx = wb.start_workflow("rowbad")
    a, b = activity_exec_id(wx, "a", 1), activity_exec_id(wx, "b", 1)
    intake = Intake(wb.engine)
    before = wb.get_workflow(wx)
    not_running = intake.activity_event(_row(a, "END_WORKFLOW", "{}"))  # a is READY
    assert not_running.outcome is Outcome.REJECTED
    skip = intake.activity_event(_row(b, "SKIP"))
    assert skip.outcome is Outcome.REJECTED and "only by the engine" in (skip.reason or "")
    bad_output = intake.activity_event(_row(a, "END_WORKFLOW", "{not json"))
    assert bad_output.outcome is Outcome.REJECTED
    assert wb.get_workflow(wx) == before
