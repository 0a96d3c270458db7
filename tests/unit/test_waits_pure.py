"""The pure rules of waits (contract/waits.py, states.py): when a wait falls due, what it
says it waits for, what its settings may be, and the workflow moves of suspension."""

from __future__ import annotations

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import LauncherSpec, WorkflowState
from whimbrel.contract import waits
from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.states import (
    WORKFLOW_PROCEEDING,
    WorkflowTransition,
    next_workflow_state,
    workflow_sources,
)

W, WT = WorkflowState, WorkflowTransition
T0 = 1_795_000_000.0


@pytest.mark.parametrize(("value", "epoch"), [
    (T0, T0), (int(T0), T0), (str(int(T0)), T0), ("2026-11-23T09:00:00Z", 1795424400.0),
    ("2026-11-23T10:00:00+01:00", 1795424400.0), ("2026-11-23T09:00:00", 1795424400.0),
    ("2026-11-23", 1795392000.0),
    (True, None), (None, None), ("", None), ("next tuesday", None), (float("nan"), None),
    (float("inf"), None), (-5, None), ([T0], None), ({"at": T0}, None),
])
def test_parse_when(value: object, epoch: float | None) -> None:
    assert waits.parse_when(value) == epoch


def test_deadlines_and_what_a_wait_waits_for() -> None:
    timer = Act("t", launcher=LauncherSpec.timer(90))
    assert waits.deadline(timer, T0, None) == T0 + 90
    until = Act("u", launcher=LauncherSpec.timer(until_input="at"), input={"at": T0 + 5})
    assert waits.deadline(until, T0, waits.merge_input({"x": 1}, until.input)) == T0 + 5
    assert waits.deadline(until, T0, {"at": "soon"}) == T0  # due at once; fails when fired
    with pytest.raises(InvalidInput, match=r"input\['at'\] of timer activity 'u'"):
        waits.timer_until(until, {"at": "soon"})
    assert waits.waiting_for(until, 1795424400.0) == "timer:2026-11-23T09:00:00Z"
    signal = Act("s", launcher=LauncherSpec.signal("paid", timeout_seconds=60))
    assert waits.deadline(signal, T0, None) == T0 + 60
    assert waits.waiting_for(signal, T0 + 60) == "signal:paid"
    approval = Act("a", launcher=LauncherSpec.approval())
    assert waits.deadline(approval, T0, None) is None  # waits for ever
    assert waits.waiting_for(approval, None) == "approval"
    assert "no decision on the approval" in waits.timeout_reason(approval)


def test_waits_are_neither_pushed_nor_claimed() -> None:
    for spec in (LauncherSpec.timer(1), LauncherSpec.signal("x"), LauncherSpec.approval()):
        assert spec.is_wait and not spec.is_push and not spec.is_pull
    assert LauncherSpec.external().is_pull and not LauncherSpec.external().is_wait
    assert LauncherSpec.python("m:f").is_push


def test_suspension_in_the_workflow_table() -> None:
    assert next_workflow_state(W.RUNNING, WT.SUSPEND) is W.SUSPENDED
    assert next_workflow_state(W.SUSPENDED, WT.RESUME) is W.RUNNING
    assert workflow_sources(WT.SUSPEND) == {W.RUNNING}
    for move in (WT.CANCEL, WT.FAIL, WT.TIME_OUT):
        assert W.SUSPENDED in workflow_sources(move)
    assert W.SUSPENDED not in workflow_sources(WT.COMPLETE)  # completes once resumed
    assert {W.REQUESTED, W.RUNNING, W.SUSPENDED} == WORKFLOW_PROCEEDING


def test_decisions_are_checked() -> None:
    assert waits.decision_text(" ana ", None) == ("ana", "")
    for by in (None, "", "  ", 5, "x" * 300):
        with pytest.raises(InvalidInput, match="by must name"):
            waits.decision_text(by, "")
    with pytest.raises(InvalidInput, match="comment"):
        waits.decision_text("ana", "c" * 5000)
    assert waits.rejection_error("bob", "") == "rejected by bob"
