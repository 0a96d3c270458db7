"""Issue 31: an expression that raises a plain Python error at run time (``input.x >
`1``` with a string ``x``, ``max_by`` over mixed types) becomes its documented error —
``ConditionFailed`` for a ``when``, ``InputFromFailed`` for an ``input_from`` — on every
path: the caller that completes the upstream, the reconcile pass after a crash, a
worker, a child run's start. Nothing is left REQUESTED or RUNNING for good."""

from __future__ import annotations

import pytest
import wb_flow_activities  # noqa: F401  (the activities below import it by name)

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    LauncherSpec,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract import conditions as cond
from whimbrel.contract.ids import activity_exec_id
from whimbrel.engine.engine import RECONCILE_GRACE_SECONDS
from whimbrel.testing import Crash, FaultInjector, StepClock, assert_contract_holds

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

A, W = ActivityState, WorkflowState
py = LauncherSpec.python
M = "wb_flow_activities"
CLOCK = StepClock

#: A comparison of a string with a number: jmespath raises a bare TypeError.
COMPARE = "input.x > `1`"
#: max_by over keys of mixed types: a bare TypeError too.
MAX_BY = "max_by(input.xs, &v)"
MIXED = {"x": "a", "xs": [{"v": 1}, {"v": "b"}]}


@pytest.mark.parametrize(("expr", "doc"), [
    (COMPARE, {"input": {"x": "a"}}),
    (MAX_BY, {"input": MIXED}),
    ("min_by(input.xs, &v)", {"input": {"xs": [{"v": "a"}, {"v": 2}]}}),
    ("input.x < input.y", {"input": {"x": "a", "y": 2}}),
])
def test_any_error_of_an_expression_is_expression_failed(expr: str, doc: dict[str, object],
                                                         ) -> None:
    with pytest.raises(cond.ExpressionFailed) as when:
        cond.evaluate_when(expr, doc)
    assert when.value.error_type == cond.CONDITION_ERROR == "ConditionFailed"
    assert when.value.field == "when" and expr in str(when.value)
    with pytest.raises(cond.ExpressionFailed) as built:
        cond.build_input({"k": expr}, doc)
    assert built.value.error_type == cond.INPUT_FROM_ERROR == "InputFromFailed"
    assert built.value.to_dict()["field"] == "input_from['k']"


def test_a_when_raising_a_type_error_fails_its_attempt_not_the_caller(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("cmp", (Act("a"), Act("b", ("a",), when=COMPARE)))
    wb.register_workflow(defn)
    wx = wb.start_workflow("cmp", {"x": "a"})
    a = activity_exec_id(wx, "a", 1)
    wb.transition_activity(a, Transition.RUNNING)
    wb.transition_activity(a, Transition.COMPLETED)  # was: TypeError, b REQUESTED for good
    b = wb.get_activity(activity_exec_id(wx, "b", 1))
    assert b.state is A.FAILED and b.error_type == "ConditionFailed", b
    assert "TypeError" in (b.error or "") and COMPARE in (b.error or "")
    wf = wb.get_workflow(wx)
    assert wf.state is W.FAILED, wf
    assert_contract_holds(wf, defn)


def test_a_reconcile_pass_decides_a_when_that_raises(wb: Whimbrel, clock: StepClock) -> None:
    """The process died right after the upstream's COMPLETED write: the reconcile pass
    decides the dependent (it used to raise TypeError on every pass)."""
    defn = WorkflowDefinition("cmp_crash", (Act("a"), Act("b", ("a",), when=COMPARE)))
    wb.register_workflow(defn)
    wx = wb.start_workflow("cmp_crash", {"x": "a"})
    a = activity_exec_id(wx, "a", 1)
    wb.transition_activity(a, Transition.RUNNING)
    crash = FaultInjector(at=1, phase="after")  # a's COMPLETED lands, nothing follows
    wb.store.write_hooks.append(crash)
    try:
        with pytest.raises(Crash):
            wb.transition_activity(a, Transition.COMPLETED)
    finally:
        wb.store.write_hooks.remove(crash)
    b = activity_exec_id(wx, "b", 1)
    assert wb.get_activity(b).state is A.REQUESTED
    clock.advance(RECONCILE_GRACE_SECONDS + 1)
    report = wb.sweep(clock())
    assert not report.errors, report
    got = wb.get_activity(b)
    assert got.state is A.FAILED and got.error_type == "ConditionFailed", got
    wf = wb.get_workflow(wx)
    assert wf.state is W.FAILED, wf
    assert_contract_holds(wf, defn)


def test_an_input_from_raising_a_type_error_fails_the_attempt(wb: Whimbrel) -> None:
    """In a worker: the attempt ends FAILED (InputFromFailed), not RUNNING for good."""
    defn = WorkflowDefinition("top", (
        Act("pick", launcher=py(f"{M}:echo"), input_from={"top": MAX_BY}),))
    wb.register_workflow(defn)
    wf = wb.wait(wb.start_workflow("top", MIXED), timeout=30)
    assert wf.state is W.FAILED, wf
    pick = wf.activity("pick")
    assert pick.state is A.FAILED and pick.error_type == "InputFromFailed", pick
    assert "max_by" in (pick.error or "")
    assert_contract_holds(wf, defn)


def test_a_child_runs_input_from_that_raises_fails_with_its_error_type(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("kid", (Act("k", launcher=py(f"{M}:echo")),)))
    defn = WorkflowDefinition("parent", (
        Act("spawn", launcher=LauncherSpec.workflow("kid"), input_from={"top": MAX_BY}),))
    wb.register_workflow(defn)
    wf = wb.wait(wb.start_workflow("parent", MIXED), timeout=30)
    assert wf.state is W.FAILED, wf
    spawn = wf.activity("spawn")
    assert spawn.state is A.FAILED and spawn.error_type == "InputFromFailed", spawn
    assert wf.child_workflow_exec_ids == ()
