"""Issue 31, silently wrong answers of the flow: a child run ended early hands its parent
the early output; ``wait()`` returns an early-ended run with what it left SKIPPED; two
simultaneous ``end_workflow`` calls have one winner; ``cancel`` of an ended run and a
reused request id with another input are refused clearly."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import wb_flow_activities  # noqa: F401  (the activities below import it by name)

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    InvalidInput,
    LauncherSpec,
    NotAllowedNow,
    RequestIdReused,
    Whimbrel,
    WorkflowAlreadyEnded,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.engine.conditions import Conditions
from whimbrel.testing import Crash, assert_contract_holds

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

A, W = ActivityState, WorkflowState
py = LauncherSpec.python
M = "wb_flow_activities"

EARLY_CHILD = WorkflowDefinition("early_kid", (
    Act("ender", launcher=py(f"{M}:finish_now")),
    Act("more", ("ender",), launcher=py(f"{M}:echo")),
))
EARLY_PARENT = WorkflowDefinition("early_parent", (
    Act("spawn", launcher=LauncherSpec.workflow("early_kid")),
    Act("after", ("spawn",), launcher=py(f"{M}:echo")),
))
ANSWER = {"answer": 42, "from": "ender"}


def test_a_child_ended_early_hands_its_parent_the_early_output(wb: Whimbrel) -> None:
    wb.register_workflow(EARLY_CHILD)
    wb.register_workflow(EARLY_PARENT)
    wf = wb.wait(wb.start_workflow("early_parent", {}), timeout=30)
    assert wf.state is W.COMPLETED, wf
    [kid] = wf.child_workflow_exec_ids
    child = wb.get_workflow(kid)
    assert child.output == ANSWER and child.activity("more").state is A.SKIPPED
    assert wf.activity("spawn").output == ANSWER  # was {"more": None}
    assert wf.activity("after").output["upstream"] == {"spawn": ANSWER}
    assert_contract_holds(wf, EARLY_PARENT)


# -- wait() returns a settled run ----------------------------------------------------------

class _DieAfterRunEnd:
    """A write hook: the process dies right after the run's terminal write (the second
    write to the workflow table after it is armed: the first claims the end), before
    what follows the end."""

    def __init__(self) -> None:
        self.table = "workflow_exec"
        self.armed = False
        self.seen = 0

    def __call__(self, phase: str, operation: str, table: str) -> None:
        if self.armed and phase == "after" and table == self.table \
                and operation == "UpdateItem":
            self.seen += 1
            if self.seen == 2:
                self.armed = False
                raise Crash("died after the run's end, before its follow-ups")


FRAUD = WorkflowDefinition("fraud", (
    Act("charge"), Act("refund", ("charge",)), Act("ship", ("charge",)),
    Act("receipt", ("refund", "ship"), trigger="none_failed")))


def test_wait_returns_the_early_ended_run_with_what_it_left_skipped(
        wb: Whimbrel) -> None:
    """The ender died between the run's end and the skips that follow it: wait() used to
    return COMPLETED with refund, ship and receipt still REQUESTED."""
    wb.register_workflow(FRAUD)
    wx = wb.start_workflow("fraud")
    charge = wb.claim(workflow_name="fraud", activity_name="charge")
    assert charge is not None
    die = _DieAfterRunEnd()
    wb.store.write_hooks.append(die)
    die.armed = True
    try:
        with pytest.raises(Crash):
            wb.engine.feature(Conditions).end_early(charge.activity_exec_id, {"blocked": True})
    finally:
        wb.store.write_hooks.remove(die)
    assert wb.get_workflow(wx).activity("refund").state is A.REQUESTED  # left so
    wf = wb.wait(wx, timeout=30)
    assert wf.state is W.COMPLETED and wf.output == {"blocked": True}
    assert {n: wf.activity(n).state for n in ("refund", "ship", "receipt")} == {
        "refund": A.SKIPPED, "ship": A.SKIPPED, "receipt": A.SKIPPED}
    assert wb.store.get_workflow(wx).check_epoch is None  # type: ignore[union-attr]
    assert_contract_holds(wf, FRAUD)


def test_the_branching_examples_fraud_case_waits_for_its_skips(wb: Whimbrel) -> None:
    """examples/branching --fraud, as run.py runs it: wait() then read the states."""
    example = importlib.util.spec_from_file_location(
        "example_branching_i31", Path(__file__).resolve().parents[2] / "examples" /
        "branching" / "run.py")
    assert example is not None and example.loader is not None
    module = importlib.util.module_from_spec(example)
    example.loader.exec_module(module)
    for _ in range(3):
        wf = module.run(wb, "fraud")
        assert wf.state is W.COMPLETED
        assert {wf.activity(n).state for n in ("refund", "ship", "receipt")} == {A.SKIPPED}


# -- a cancel of an ended run, a request id given another input ------------------------

ONE = WorkflowDefinition("one_ext", (Act("a"),))


def test_cancel_of_an_ended_run_is_refused_clearly(wb: Whimbrel) -> None:
    wb.register_workflow(ONE)
    wx = wb.start_workflow("one_ext")
    a = wb.claim(workflow_name="one_ext")
    assert a is not None
    wb.transition_activity(a.activity_exec_id, "COMPLETED")
    before = wb.get_workflow(wx)
    with pytest.raises(WorkflowAlreadyEnded) as refused:  # was: silently nothing
        wb.cancel_workflow(wx)
    assert isinstance(refused.value, NotAllowedNow)
    assert refused.value.to_dict() == {
        "error": "WorkflowAlreadyEnded", "workflow_exec_id": wx, "workflow_state": "COMPLETED",
        "message": f"workflow {wx} already ended COMPLETED: nothing to cancel"}
    assert wb.get_workflow(wx) == before
    # A run that ended CANCELLED is cancelled again quietly (idempotent).
    other = wb.start_workflow("one_ext")
    wb.cancel_workflow(other)
    wb.cancel_workflow(other)
    assert wb.get_workflow(other).state is W.CANCELLED


def test_a_request_id_given_another_input_is_refused(wb: Whimbrel) -> None:
    wb.register_workflow(ONE)
    wx = wb.start_workflow("one_ext", {"a": 1, "b": [1, 2]}, request_id="order-7")
    # The same request again (any key order) is the same run.
    assert wb.start_workflow("one_ext", {"b": [1, 2], "a": 1}, request_id="order-7") == wx
    with pytest.raises(RequestIdReused) as refused:  # was: the first run, silently
        wb.start_workflow("one_ext", {"a": 2}, request_id="order-7")
    assert isinstance(refused.value, InvalidInput)
    assert refused.value.request_id == "order-7" and refused.value.workflow_exec_id == wx
    assert "'order-7'" in str(refused.value) and "another input" in str(refused.value)
    assert wb.get_workflow(wx).input == {"a": 1, "b": [1, 2]}
    assert wb.store.cold.get_request("order-7").input == '{"a":1,"b":[1,2]}'  # type: ignore[union-attr]
    # The Simple API's request row: the same request again writes nothing; another input
    # under its id is refused alike.
    rid = wb.request_workflow("one_ext", {"x": 1}, request_id="row-1")
    assert wb.request_workflow("one_ext", {"x": 1}, request_id="row-1") == rid
    with pytest.raises(RequestIdReused, match="'row-1'"):
        wb.request_workflow("one_ext", {"x": 2}, request_id="row-1")
