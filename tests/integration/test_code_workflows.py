"""Code workflows (issue 26) on DynamoDB Local through the Python API: steps are
attempts, decisions replay the function."""

from __future__ import annotations

from typing import Any

import pytest
import wb_code_workflows as code

from whimbrel import ActivityState, Whimbrel, WorkflowState
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.testing import wait_until

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

W = WorkflowState
A = ActivityState


@pytest.fixture(params=["in_memory", "always_replay"])
def cwb(wb: Whimbrel, request: pytest.FixtureRequest) -> Whimbrel:
    wb.engine.feature(CodeRuns).always_replay = request.param == "always_replay"
    return wb


def test_a_chain_of_steps_returns_the_functions_value(cwb: Whimbrel) -> None:
    assert cwb.register_workflow(code.chain) == 1
    wx = cwb.start_workflow("chain", {"n": 0, "steps": 5})
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.COMPLETED, run
    assert run.output == {"n": 5}
    names = [a.activity_name for a in run.activities]
    assert names == [f"add_one#{k}" for k in range(1, 6)]
    assert all(a.state is A.COMPLETED and a.attempt == 1 for a in run.activities)
    assert [a.output for a in run.activities] == [{"n": k} for k in range(1, 6)]
    # each step ran once
    assert [code.CALLS[(wx, f"add_one#{k}")] for k in range(1, 6)] == [1] * 5


def test_a_step_is_retried_per_its_policy(cwb: Whimbrel) -> None:
    cwb.register_workflow(code.retrying)
    wx = cwb.start_workflow("retrying", {"fail_until": 3})
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.COMPLETED, run
    attempts = [(a.activity_name, a.attempt, a.state) for a in run.activities]
    assert attempts == [("flaky#1", 1, A.FAILED), ("flaky#1", 2, A.FAILED),
                        ("flaky#1", 3, A.COMPLETED)]
    assert run.output == 3


def test_step_failed_after_its_retries_is_caught_by_the_code(cwb: Whimbrel) -> None:
    cwb.register_workflow(code.caught)
    wx = cwb.start_workflow("caught")
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.COMPLETED, run
    boom = [a for a in run.activities if a.activity_name == "boom#1"]
    assert [a.attempt for a in boom] == [1, 2]
    assert run.output == {"state": "FAILED", "error": boom[-1].error,
                          "error_type": "RuntimeError",
                          "refund": {"undo": boom[-1].activity_exec_id}}
    assert "card declined" in (boom[-1].error or "")


def test_an_uncaught_exception_fails_the_run_with_its_error(cwb: Whimbrel) -> None:
    cwb.register_workflow(code.uncaught)
    wx = cwb.start_workflow("uncaught")
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.FAILED, run
    assert run.error == "KeyError: 'no such order'"
    assert [a.activity_name for a in run.activities] == ["echo#1"]


def test_steps_are_named_by_name_and_occurrence(cwb: Whimbrel) -> None:
    cwb.register_workflow(code.named)
    wx = cwb.start_workflow("named")
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.COMPLETED, run
    assert run.output == ["a", "b", "c"]
    assert [a.activity_name for a in run.activities] == ["echo#1", "echo#2", "other#1"]
    assert run.priority == 3  # the decorator's default priority


def _ready(wb: Whimbrel, aeid: str) -> None:
    wait_until(lambda: (act := wb.engine.store.get_activity(aeid)) is not None
               and act.state is A.READY, timeout=30,
               message=lambda: f"{aeid}: {wb.engine.store.get_activity(aeid)}")


def _complete(wb: Whimbrel, aeid: str, output: Any) -> None:
    _ready(wb, aeid)
    wb.transition_activity(aeid, "RUNNING")
    wb.transition_activity(aeid, "COMPLETED", output=output)


def test_non_determinism_fails_the_run_naming_both_and_a_redrive_continues(
        cwb: Whimbrel) -> None:
    code.DEPLOYED["evolving"] = 1
    cwb.register_workflow(code.evolving)
    wx = cwb.start_workflow("evolving")
    gate = f"{wx}:gate#1:1"
    _ready(cwb, gate)
    code.DEPLOYED["evolving"] = 2  # the code changes under the running run
    # A deploy is a new process: no function is kept running from the old code.
    cwb.engine.feature(CodeRuns).histories.give_up_live()
    try:
        _complete(cwb, gate, "opened")
        run = cwb.wait(wx, timeout=30)
    finally:
        code.DEPLOYED["evolving"] = 1
    assert run.state is W.FAILED, run
    assert "non-determinism at step 1" in (run.error or "")
    assert "gate#1" in (run.error or "") and "echo#1" in (run.error or "")
    # nothing was scheduled by the diverging replay
    assert [a.activity_name for a in run.activities] == ["gate#1"]
    cwb.redrive_workflow(wx)  # the fix is deployed: the run goes on from its history
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.COMPLETED, run
    assert run.output == {"after": "opened"}
    assert [a.activity_name for a in run.activities] == ["gate#1", "echo#1"]


def test_now_uuid_and_random_are_the_same_on_every_replay(cwb: Whimbrel) -> None:
    cwb.register_workflow(code.deterministic)
    wx = cwb.start_workflow("deterministic")
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.COMPLETED, run
    out = run.output
    assert out["recorded"] == out["replayed"]  # the last replay computed the same values
    assert out["second"]["uuid"] != out["recorded"]["uuid"]
    first = run.activity("echo#1")
    assert out["recorded"]["now"] == pytest.approx(run.created_epoch)
    assert out["second"]["now"] == pytest.approx(first.ended_epoch)  # after its result


def test_properties_are_saved_with_each_decision(cwb: Whimbrel) -> None:
    cwb.register_workflow(code.props)
    wx = cwb.start_workflow("props", {"order": "o-1"})
    assert cwb.get_workflow(wx).properties == {"stage": "waiting for the gate",
                                               "order": "o-1"}
    _complete(cwb, f"{wx}:gate#1:1", {"ok": True})
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.COMPLETED, run
    assert run.properties == {"stage": "done", "order": "o-1", "gate": {"ok": True}}
    assert run.output == {"ok": True}


def test_started_steps_run_in_parallel_and_results_come_in_call_order(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(code.parallel)
    wx = cwb.start_workflow("parallel", {"width": 8})
    run = cwb.wait(wx, timeout=60)
    assert run.state is W.COMPLETED, run
    assert run.output == {"first": "first", "outs": list(range(1, 9))}
    names = [a.activity_name for a in run.activities]
    assert sorted(names) == sorted(["first#1", "last#1",
                                    *(f"add_one#{k}" for k in range(1, 9))])
    assert all(a.attempt == 1 for a in run.activities)  # each scheduled once
    assert all(code.CALLS[(wx, f"add_one#{k}")] == 1 for k in range(1, 9))


def test_a_redrive_runs_a_step_that_failed_for_good_again_and_keeps_completed_ones(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(code.fails_for_good)
    wx = cwb.start_workflow("fails_for_good")
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.FAILED, run
    assert "StepFailed: step flaky#1 FAILED" in (run.error or "")
    cwb.redrive_workflow(wx)  # flaky's input says it fails until attempt 99: fails again
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.FAILED, run
    assert [(a.activity_name, a.attempt) for a in run.activities] == [
        ("echo#1", 1), ("flaky#1", 1), ("flaky#1", 2)]
    assert code.CALLS[(wx, "echo#1")] == 1  # a completed step never runs again


def test_continue_as_new_ends_the_run_and_names_the_next(cwb: Whimbrel) -> None:
    cwb.register_workflow(code.countdown)
    wx = cwb.start_workflow("countdown", {"n": 2})
    chain = []
    for _ in range(3):
        run = cwb.wait(wx, timeout=30)
        assert run.state is W.COMPLETED, run
        chain.append(run)
        if run.continued_as is None:
            break
        wx = run.continued_as
    assert [r.input for r in chain] == [{"n": 2}, {"n": 1}, {"n": 0}]
    assert [r.output for r in chain] == [{"n": 1}, {"n": 0}, "done"]
    assert chain[-1].continued_as is None


def test_patched_is_false_where_a_run_passed_the_point_and_true_for_new_runs(
        cwb: Whimbrel) -> None:
    code.DEPLOYED["patchy"] = 1
    cwb.register_workflow(code.patchy)
    old = cwb.start_workflow("patchy")
    _complete(cwb, f"{old}:gate#1:1", None)
    _ready(cwb, f"{old}:gate2#1:1")  # past the point where version 2 adds a step
    code.DEPLOYED["patchy"] = 2      # the patch is deployed
    try:
        new = cwb.start_workflow("patchy")
        _complete(cwb, f"{new}:gate#1:1", None)
        _ready(cwb, f"{new}:gate2#1:1")
        _complete(cwb, f"{old}:gate2#1:1", None)
        _complete(cwb, f"{new}:gate2#1:1", None)
        old_run, new_run = cwb.wait(old, timeout=30), cwb.wait(new, timeout=30)
    finally:
        code.DEPLOYED["patchy"] = 1
    assert old_run.state is W.COMPLETED, old_run  # no non-determinism
    assert old_run.output == ["end"]
    assert new_run.state is W.COMPLETED, new_run
    assert new_run.output == ["extra", "end"]


def test_a_child_run_is_waited_for_and_a_dispatched_one_is_not(cwb: Whimbrel) -> None:
    for wf in (code.parent, code.chain, code.named):
        cwb.register_workflow(wf)
    wx = cwb.start_workflow("parent")
    run = cwb.wait(wx, timeout=60)
    assert run.state is W.COMPLETED, run
    assert run.output["child"] == {"n": 12}
    child = run.activity("child-chain#1")
    assert child.child_workflow_exec_id is not None
    assert cwb.get_workflow(child.child_workflow_exec_id).parent_workflow_exec_id == wx
    dispatched = cwb.wait(run.output["dispatched"], timeout=30)
    assert dispatched.state is W.COMPLETED and dispatched.output == ["a", "b", "c"]
    assert dispatched.parent_workflow_exec_id is None  # fire and forget: not its child


def test_map_runs_a_step_per_item_in_lanes_and_tolerates_failures(cwb: Whimbrel) -> None:
    cwb.register_workflow(code.mapper)
    wx = cwb.start_workflow("mapper", {"n": 12, "lanes": 3, "tolerated": 2})
    run = cwb.wait(wx, timeout=60)
    assert run.state is W.COMPLETED, run
    assert run.output == [None if i % 7 == 3 else i / 2 for i in range(12)]
    # One step of the run; its items are map items (tests/integration/test_code_map.py).
    assert [a.activity_name for a in run.activities] == ["half#1"]
    assert sorted(run.map_items("half#1")) == list(range(12))
    bad = cwb.start_workflow("mapper", {"n": 12, "lanes": 4, "tolerated": 1})
    failed = cwb.wait(bad, timeout=60)
    assert failed.state is W.FAILED, failed
    assert "StepFailed: step half#1 FAILED: item " in (failed.error or "")
