"""Clean-up on cancel in code workflows (issue 26): a cancelled run's code runs once
more, its wait raises ``Cancelled``, the ``finally``/``except Cancelled`` blocks run and
their steps are scheduled and run; the run ends CANCELLED (docs/code-workflows.md,
"Clean-up on cancel")."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
import wb_code_cancel as code

from whimbrel import ActivityState, RedriveNotAllowed, Whimbrel, WorkflowState
from whimbrel.contract.dataflow import child_request_id
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.engine.code_cancel import CANCELLED_AGAIN
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.testing import StepClock, wait_until

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

W = WorkflowState
A = ActivityState
CLOCK = StepClock


@pytest.fixture(params=["in_memory", "always_replay"])
def cwb(wb: Whimbrel, request: pytest.FixtureRequest) -> Iterator[Whimbrel]:
    wb.engine.feature(CodeRuns).always_replay = request.param == "always_replay"
    code.HOLD.clear()
    yield wb
    code.HOLD.set()  # never leave a step's thread waiting, even when the test failed


def _state(wb: Whimbrel, aeid: str, state: ActivityState) -> None:
    wait_until(lambda: (act := wb.engine.store.get_activity(aeid)) is not None
               and act.state is state, timeout=30,
               message=lambda: f"{aeid}: {wb.engine.store.get_activity(aeid)}")


def _steps(wb: Whimbrel, wx: str) -> dict[str, str]:
    return {a.activity_name: a.state.value for a in wb.get_workflow(wx).activities}


def test_a_cancel_while_waiting_for_a_signal_runs_the_finally_and_its_step(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(code.cleanup_finally)
    wx = cwb.start_workflow("cleanup_finally")
    _state(cwb, f"{wx}:signal-go#1:1", A.READY)
    cwb.cancel_workflow(wx)
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.CANCELLED, run
    assert run.error is None
    assert _steps(cwb, wx) == {"signal-go#1": "CANCELLED", "dispose#1": "COMPLETED"}
    assert run.activity("dispose#1").output == {"disposed": {"hold": wx}}
    assert run.properties == {"stage": {"disposed": {"hold": wx}}}
    assert code.CALLS[(wx, "dispose#1")] == 1


def test_a_cancel_during_a_running_step_cleans_up_once_the_step_has_stopped(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(code.cleanup_step)
    wx = cwb.start_workflow("cleanup_step", {"job": 1})
    work = f"{wx}:work#1:1"
    _state(cwb, work, A.READY)
    cwb.transition_activity(work, "RUNNING")
    cwb.cancel_workflow(wx)
    assert cwb.get_activity(work).state is A.CANCELLED_RUNNING
    assert cwb.get_workflow(wx).state is W.CANCEL_REQUESTED  # the step still runs
    assert _steps(cwb, wx) == {"work#1": "CANCELLED_RUNNING"}  # no clean-up yet
    cwb.transition_activity(work, "COMPLETED", output="too late")  # it stopped
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.CANCELLED, run
    assert _steps(cwb, wx) == {"work#1": "CANCELLED", "dispose#1": "COMPLETED",
                               "dispose#2": "COMPLETED"}
    assert run.properties == {"undone": [{"disposed": "undo work"},
                                         {"disposed": "tell someone"}]}


def test_the_playbook_suspended_step_is_disposed_of_when_the_run_is_cancelled(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(code.playbook_cleanup)
    wx = cwb.start_workflow("playbook_cleanup", {"steps": [
        {"name": "prepare", "outcome": "go"}, {"name": "approve", "outcome": "suspend"},
        {"name": "ship", "outcome": "complete"}]})
    _state(cwb, f"{wx}:signal-resume#1:1", A.READY)
    assert cwb.get_workflow(wx).properties == {"suspended": "approve"}
    cwb.cancel_workflow(wx)
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.CANCELLED, run
    assert _steps(cwb, wx) == {"run_step#1": "COMPLETED", "run_step#2": "COMPLETED",
                               "signal-resume#1": "CANCELLED", "dispose#1": "COMPLETED"}
    assert run.activity("dispose#1").output == {"disposed": {"suspended": "approve"}}
    # The cancelled wait left the timers index with its CANCELLED write: nothing fires.
    assert cwb.get_activity(f"{wx}:signal-resume#1:1").waiting_for is None


def test_code_without_clean_up_ends_cancelled_within_the_cancel_call(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(code.cleanup_returns)
    runs = cwb.engine.feature(CodeRuns)
    wx = cwb.start_workflow("cleanup_returns")
    _state(cwb, f"{wx}:signal-go#1:1", A.READY)
    before = runs.decisions
    cwb.cancel_workflow(wx)
    run = cwb.get_workflow(wx)  # no wait: the cancel's own settle ended it
    assert run.state is W.CANCELLED, run
    assert runs.decisions == before + 1  # the one clean-up decision
    assert run.output is None  # what the code returned is not an output: it was cancelled
    assert run.properties == {"cut": "signal-go#1"}
    assert _steps(cwb, wx) == {"signal-go#1": "CANCELLED"}


def test_except_exception_does_not_swallow_the_cancel(cwb: Whimbrel) -> None:
    cwb.register_workflow(code.cleanup_broad_except)
    wx = cwb.start_workflow("cleanup_broad_except")
    _state(cwb, f"{wx}:signal-go#1:1", A.READY)
    cwb.cancel_workflow(wx)
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.CANCELLED, run
    assert _steps(cwb, wx) == {"signal-go#1": "CANCELLED"}


def test_a_clean_up_that_raises_ends_the_run_cancelled_with_its_error(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(code.cleanup_raises)
    wx = cwb.start_workflow("cleanup_raises")
    _state(cwb, f"{wx}:signal-go#1:1", A.READY)
    cwb.cancel_workflow(wx)
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.CANCELLED, run
    assert run.error == "clean-up failed: RuntimeError: disposal broke"


def test_a_wait_in_clean_up_raises_cancelled_again_and_an_external_step_is_refused(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(code.cleanup_waits)
    cwb.register_workflow(code.cleanup_external)
    waits = cwb.start_workflow("cleanup_waits")
    external = cwb.start_workflow("cleanup_external")
    for wx in (waits, external):
        _state(cwb, f"{wx}:signal-go#1:1", A.READY)
        cwb.cancel_workflow(wx)
    run = cwb.wait(waits, timeout=30)
    assert run.state is W.CANCELLED, run
    assert run.properties == {"sleep": "cancelled"}
    assert _steps(cwb, waits) == {"signal-go#1": "CANCELLED", "dispose#1": "COMPLETED"}
    run = cwb.wait(external, timeout=30)
    assert run.state is W.CANCELLED, run
    assert "clean-up step undo#1 is external" in (run.error or ""), run.error
    assert _steps(cwb, external) == {"signal-go#1": "CANCELLED"}


def test_a_second_cancel_during_clean_up_ends_the_run_at_once(cwb: Whimbrel) -> None:
    cwb.register_workflow(code.cleanup_held)
    wx = cwb.start_workflow("cleanup_held")
    _state(cwb, f"{wx}:signal-go#1:1", A.READY)
    cwb.cancel_workflow(wx)
    held = f"{wx}:held#1:1"
    _state(cwb, held, A.RUNNING)  # the clean-up step runs while the run is cancelling
    assert cwb.get_workflow(wx).state is W.CANCEL_REQUESTED
    cwb.cancel_workflow(wx)  # the caller insists
    run = cwb.get_workflow(wx)
    assert run.state is W.CANCELLED, run
    assert run.error == CANCELLED_AGAIN
    assert cwb.get_activity(held).state is A.CANCELLED_RUNNING  # asked to stop
    code.HOLD.set()
    _state(cwb, held, A.CANCELLED)
    assert cwb.get_workflow(wx).state is W.CANCELLED


def test_the_run_deadline_during_clean_up_ends_it_timed_out(
        cwb: Whimbrel, clock: StepClock) -> None:
    cwb.register_workflow(code.cleanup_deadline)
    wx = cwb.start_workflow("cleanup_deadline")
    _state(cwb, f"{wx}:signal-go#1:1", A.READY)
    cwb.cancel_workflow(wx)
    held = f"{wx}:held#1:1"
    _state(cwb, held, A.RUNNING)
    cwb.sweep(clock.advance(3601))
    run = cwb.get_workflow(wx)
    assert run.state is W.TIMED_OUT, run
    assert cwb.get_activity(held).state is A.CANCELLED_RUNNING
    code.HOLD.set()
    _state(cwb, held, A.CANCELLED)


def test_a_run_whose_clean_up_ran_steps_is_not_redriven_one_without_is(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(code.cleanup_finally)
    cwb.register_workflow(code.cleanup_returns)
    cleaned = cwb.start_workflow("cleanup_finally")
    plain = cwb.start_workflow("cleanup_returns")
    for wx in (cleaned, plain):
        _state(cwb, f"{wx}:signal-go#1:1", A.READY)
        cwb.cancel_workflow(wx)
        assert cwb.wait(wx, timeout=30).state is W.CANCELLED
    with pytest.raises(RedriveNotAllowed, match=r"clean-up steps dispose#1"):
        cwb.redrive_workflow(cleaned)
    cwb.redrive_workflow(plain)  # runs on from the cut: the wait gets a new attempt
    _state(cwb, f"{plain}:signal-go#1:2", A.READY)
    cwb.signal(plain, "go", 1)
    run = cwb.wait(plain, timeout=30)
    assert run.state is W.COMPLETED, run
    assert run.output == "signalled"


def test_a_run_cancelled_while_queued_never_runs_its_code(cwb: Whimbrel) -> None:
    cwb.register_workflow(code.cleanup_finally)  # this process is a worker for the code
    # A definition of one run slot: its second run waits QUEUED, its code never ran.
    cwb.engine.definitions.register(replace(code.cleanup_finally.definition(),
                                            name="cleanup_one", max_running=1))
    running = cwb.start_workflow("cleanup_one")
    waiting = cwb.start_workflow("cleanup_one")
    assert cwb.get_workflow(waiting).state is W.QUEUED
    decisions = cwb.engine.feature(CodeRuns).decisions
    cwb.cancel_workflow(waiting)
    run = cwb.wait(waiting, timeout=30)
    assert run.state is W.CANCELLED and run.activities == (), run
    assert cwb.engine.feature(CodeRuns).decisions == decisions  # nothing to clean up
    _state(cwb, f"{running}:signal-go#1:1", A.READY)
    cwb.cancel_workflow(running)  # its code ran: it cleans up
    run = cwb.wait(running, timeout=30)
    assert run.state is W.CANCELLED, run
    assert sorted(a.activity_name for a in run.activities) == ["dispose#1", "signal-go#1"]


def test_a_failing_run_cancelled_ends_cancelled_with_its_error_and_no_clean_up(
        cwb: Whimbrel) -> None:
    cwb.register_workflow(code.cleanup_after_failure)
    wx = cwb.start_workflow("cleanup_after_failure")
    slow = f"{wx}:slow#1:1"
    _state(cwb, slow, A.READY)
    cwb.transition_activity(slow, "RUNNING")
    wait_until(lambda: cwb.get_workflow(wx).state is W.FAILED_WAITING, timeout=30)
    decisions = cwb.engine.feature(CodeRuns).decisions
    cwb.cancel_workflow(wx)
    cwb.transition_activity(slow, "COMPLETED")  # it stopped
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.CANCELLED, run
    assert "card declined" in (run.error or "") and "clean-up" not in (run.error or "")
    assert cwb.engine.feature(CodeRuns).decisions == decisions  # its code had ended


def test_a_cancelled_parent_cancels_its_child_and_both_clean_up(cwb: Whimbrel) -> None:
    cwb.register_workflow(code.cleanup_parent)
    cwb.register_workflow(code.cleanup_finally)
    wx = cwb.start_workflow("cleanup_parent")
    attempt = f"{wx}:child-cleanup_finally#1:1"
    child = workflow_exec_id_for(child_request_id(attempt))
    _state(cwb, f"{child}:signal-go#1:1", A.READY)
    cwb.cancel_workflow(wx)
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.CANCELLED, run
    assert _steps(cwb, wx) == {"child-cleanup_finally#1": "CANCELLED",
                               "dispose#1": "COMPLETED"}
    assert run.activity("dispose#1").output == {"disposed": "parent"}
    ended = cwb.wait(child, timeout=30)
    assert ended.state is W.CANCELLED, ended
    assert _steps(cwb, child) == {"signal-go#1": "CANCELLED", "dispose#1": "COMPLETED"}


def test_a_clean_up_step_that_times_out_reaches_the_code_as_step_failed(
        cwb: Whimbrel, clock: StepClock) -> None:
    cwb.register_workflow(code.cleanup_times_out)
    wx = cwb.start_workflow("cleanup_times_out")
    _state(cwb, f"{wx}:signal-go#1:1", A.READY)
    cwb.cancel_workflow(wx)
    held = f"{wx}:held#1:1"
    _state(cwb, held, A.RUNNING)
    # Past its start-to-close time, and the grace for a result still in flight.
    cwb.sweep(clock.advance(61 + cwb.engine.in_flight_grace_seconds))
    assert cwb.get_activity(held).state is A.TIMED_OUT
    code.HOLD.set()  # its code ends late: kept as a late report, the state stays
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.CANCELLED, run
    assert cwb.get_activity(held).state is A.TIMED_OUT
    assert run.properties == {"held": "TIMED_OUT"}
