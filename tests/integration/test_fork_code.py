"""Issue 29, fork of a code run from a step ``name#k`` on DynamoDB Local: the steps that
completed before it are kept (recorded as reused, never called again: ``fork.calls``
counts each step function's calls), the new run's code replays over them with the
source's ``ctx.now``/``uuid4``/``random``, and the step and everything after it run again.
The clock stands still (``CLOCK = StepClock``) unless a test moves it."""

from __future__ import annotations

import json

import pytest
import wb_fork_code as fork

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    InvalidInput,
    LauncherSpec,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.ids import activity_exec_id
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.testing import StepClock, wait_until

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

CLOCK = StepClock
A, W = ActivityState, WorkflowState


@pytest.fixture(params=["in_memory", "always_replay"])
def cwb(wb: Whimbrel, request: pytest.FixtureRequest) -> Whimbrel:
    wb.engine.feature(CodeRuns).always_replay = request.param == "always_replay"
    return wb


def _ended(wb: Whimbrel, wx: str, state: WorkflowState) -> None:
    run = wb.wait(wx, timeout=30)
    assert run.state is state, run


def test_a_loop_forked_from_its_third_step_reuses_the_first_two(
        cwb: Whimbrel, clock: StepClock) -> None:
    cwb.register_workflow(fork.loop)
    src = cwb.start_workflow("fork_loop", {"start": 10, "steps": 5})
    _ended(cwb, src, W.COMPLETED)
    clock.advance(100)  # the fork runs later: its own steps end at another time
    new = cwb.fork_workflow(src, from_activity="add#3")
    run = cwb.wait(new, timeout=30)
    assert run.state is W.COMPLETED, run
    assert (run.forked_from, run.redrive_count, run.version) == (src, 0, 1)
    reused = {a.activity_name: a.reused_from for a in run.activities if a.reused_from}
    assert reused == {"add#1": activity_exec_id(src, "add#1", 1),
                      "add#2": activity_exec_id(src, "add#2", 1)}
    # The kept steps were never called in the fork; the third and after were, once each.
    assert [fork.calls(new, f"add#{k}") for k in range(1, 6)] == [0, 0, 1, 1, 1]
    assert [fork.calls(src, f"add#{k}") for k in range(1, 6)] == [1] * 5
    assert [a.activity_name for a in run.activities] == [f"add#{k}" for k in range(1, 6)]
    source = cwb.get_workflow(src)
    assert run.output["total"] == source.output["total"] == 15
    assert run.properties == source.properties == {"total": 15}
    # Before the fork point the code computed what the source's did (now, uuid, random);
    # after it the sequences go on as the source's, and the time is the fork's own.
    before, after = run.output["seen"][:3], run.output["seen"][3:]
    assert before == source.output["seen"][:3]
    assert [(v["uuid"], v["random"]) for v in after] == [
        (v["uuid"], v["random"]) for v in source.output["seen"][3:]]
    assert after[0]["now"] == pytest.approx(source.output["seen"][3]["now"] + 100)
    # A fork of the fork replays the first run's sequences too (and the fork's times).
    again = cwb.wait(cwb.fork_workflow(new, from_activity="add#5"), timeout=30)
    assert again.state is W.COMPLETED, again
    assert again.activity("add#3").reused_from == activity_exec_id(new, "add#3", 1)
    assert again.output["seen"][:5] == run.output["seen"][:5]
    assert [fork.calls(again.workflow_exec_id, f"add#{k}") for k in range(1, 6)] == [
        0, 0, 0, 0, 1]


def test_a_saga_forked_from_its_failed_charge_with_fixed_code_completes(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(fork.saga)
    src = cwb.start_workflow("fork_saga", {"order": "o-7", "amount": "12.50"})
    _ended(cwb, src, W.FAILED)
    failed = cwb.get_workflow(src)
    assert "cents must be a whole number" in (failed.error or ""), failed.error
    assert failed.properties == {"stage": "released"}
    # Forked before the fix, it fails the same way: the compensation runs again.
    same = cwb.wait(cwb.fork_workflow(src, from_activity="charge"), timeout=30)
    assert same.state is W.FAILED and same.properties == {"stage": "released"}, same
    assert fork.calls(same.workflow_exec_id, "release#1") == 1
    assert fork.calls(same.workflow_exec_id, "reserve#1") == 0
    assert cwb.register_workflow(fork.saga_fixed) == 2  # the fix is deployed
    new = cwb.fork_workflow(src, from_activity="charge#1", version=2)
    run = cwb.wait(new, timeout=30)
    assert run.state is W.COMPLETED, run
    assert run.version == 2
    charged = cwb.engine.store.get_activity(activity_exec_id(src, "charge#1", 1))
    assert charged is not None and charged.input is not None
    key = json.loads(charged.input)["key"]  # the source's idempotency key, kept
    assert run.output == {"held": {"hold": "h-o-7"}, "paid": {"paid": 1250, "key": key}}
    assert run.activity("reserve#1").reused_from == activity_exec_id(src, "reserve#1", 1)
    assert run.activity("charge#1").reused_from is None
    assert sorted(a.activity_name for a in run.activities) == ["charge#1", "reserve#1"]
    assert (fork.calls(new, "reserve#1"), fork.calls(new, "charge#1")) == (0, 1)
    assert fork.calls(new, "release#1") == 0  # the compensation is not in the fork
    assert run.properties == {"stage": "paid"}
    assert cwb.get_workflow(src).state is W.FAILED  # the source is left as it was


def test_a_fork_after_a_signal_and_a_sleep_waits_for_neither(
        wb: Whimbrel, clock: StepClock) -> None:
    wb.register_workflow(fork.waits)
    src = wb.start_workflow("fork_waits")
    wb.signal(src, "paid", {"eur": 12}, signal_id="p-1")
    sleep = activity_exec_id(src, "sleep#1", 1)
    wait_until(lambda: (act := wb.engine.store.get_activity(sleep)) is not None
               and act.state is A.READY, timeout=30)
    assert wb.sweep(clock.advance(3600)).timers_fired == [sleep]
    _ended(wb, src, W.FAILED)
    assert fork.calls(src, "ship#1") == 1
    fork.BROKEN["ship"] = False
    try:
        new = wb.fork_workflow(src, from_activity="ship")  # a bare name: its first call
        run = wb.wait(new, timeout=30)  # no signal sent, no sweep: nothing to wait for
    finally:
        fork.BROKEN["ship"] = True
    assert run.state is W.COMPLETED, run
    assert run.output == {"shipped": {"eur": 12}}
    assert {a.activity_name for a in run.activities if a.reused_from} == {
        "signal-paid#1", "sleep#1"}
    assert run.activity("signal-paid#1").output == {"eur": 12}
    assert fork.calls(new, "ship#1") == 1


def test_a_child_run_before_the_fork_point_is_kept_not_started_again(
        wb: Whimbrel) -> None:
    wb.register_workflow(fork.loop)
    wb.register_workflow(fork.parent)
    src = wb.start_workflow("fork_parent")
    _ended(wb, src, W.FAILED)
    children = wb.count_workflows(name="fork_loop")
    fork.BROKEN["ship"] = False
    try:
        run = wb.wait(wb.fork_workflow(src, from_activity="ship#1"), timeout=30)
    finally:
        fork.BROKEN["ship"] = True
    assert run.state is W.COMPLETED and run.output == {"shipped": 1}, run
    kept = run.activity("child-fork_loop#1")
    assert kept.reused_from == activity_exec_id(src, "child-fork_loop#1", 1)
    assert kept.output == {"total": 1, "seen": kept.output["seen"]}
    assert wb.count_workflows(name="fork_loop") == children  # no second child


def test_a_new_input_that_takes_another_path_is_a_non_determinism(wb: Whimbrel) -> None:
    wb.register_workflow(fork.branchy)
    src = wb.start_workflow("fork_branchy", {})
    _ended(wb, src, W.COMPLETED)
    new = wb.fork_workflow(src, from_activity="add#2", input={"express": True})
    run = wb.wait(new, timeout=30)
    assert run.state is W.FAILED, run
    assert run.input == {"express": True}
    assert "non-determinism at step 1: the history holds add#1, the code asked for " \
           "express#1" in (run.error or ""), run.error
    assert "a fork's new input or code took another path" in (run.error or "")
    # Nothing was scheduled by the diverging replay: only the kept step is there.
    assert [(a.activity_name, a.reused_from is not None) for a in run.activities] == [
        ("add#1", True)]
    # The same input replays: from add#1 nothing is kept, everything runs again.
    again = wb.fork_workflow(src, from_activity="add#1")
    done = wb.wait(again, timeout=30)
    assert done.state is W.COMPLETED and done.output == 3, done
    assert not any(a.reused_from for a in done.activities)


def test_the_same_request_id_is_one_fork_of_a_code_run(wb: Whimbrel) -> None:
    wb.register_workflow(fork.loop)
    src = wb.start_workflow("fork_loop", {"start": 0, "steps": 3})
    _ended(wb, src, W.COMPLETED)
    ask = f"fork-of-{src}"  # its own per test: the call counter is keyed by the run
    one = wb.fork_workflow(src, from_activity="add#2", request_id=ask)
    two = wb.fork_workflow(src, from_activity="add#2", request_id=ask)
    assert one == two
    run = wb.wait(one, timeout=30)
    assert run.state is W.COMPLETED, run
    assert [(a.activity_name, a.attempt) for a in run.activities] == [
        ("add#1", 1), ("add#2", 1), ("add#3", 1)]
    assert [fork.calls(one, f"add#{k}") for k in (1, 2, 3)] == [0, 1, 1]


def test_bad_steps_are_refused_and_nothing_is_written(wb: Whimbrel) -> None:
    wb.register_workflow(fork.loop)
    src = wb.start_workflow("fork_loop", {"start": 0, "steps": 4})
    _ended(wb, src, W.COMPLETED)
    before = wb.count_workflows(name="fork_loop")
    with pytest.raises(InvalidInput, match=r"has no step 'ad#1'; its steps, in order: "
                                           r"add#1, add#2, add#3, add#4$"):
        wb.fork_workflow(src, from_activity="ad#1")
    with pytest.raises(InvalidInput, match=r"never reached step 'add#9': its code called "
                                           r"'add' 4 time\(s\) \(add#1, add#2, add#3, \.\.\.\)"):
        wb.fork_workflow(src, from_activity="add#9")
    for bad in ("add#0", "add#x", "#2", "add#"):
        with pytest.raises(InvalidInput, match="is not a step <name>#<k>"):
            wb.fork_workflow(src, from_activity=bad)
    assert wb.count_workflows(name="fork_loop") == before
    # A DAG run given a step name: its activities, and what '#k' is for.
    wb.register_workflow(WorkflowDefinition("fork_dag", (
        ActivityDefinition("charge", launcher=LauncherSpec.external()),)))
    dag = wb.start_workflow("fork_dag")
    with pytest.raises(InvalidInput, match=r"has no activity 'charge#2'; its activities: "
                                           r"charge \('<name>#<k>' names a step of a code"):
        wb.fork_workflow(dag, from_activity="charge#2")
    assert wb.count_workflows(name="fork_dag") == 1
