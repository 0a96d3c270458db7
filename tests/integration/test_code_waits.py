"""Code workflows that wait (issue 26): ``ctx.sleep``, ``ctx.wait_signal`` and
``ctx.wait_approval`` on the waits machinery, time driven by the test's clock."""

from __future__ import annotations

import pytest
import wb_code_workflows as code

from whimbrel import ActivityState, Whimbrel, WorkflowState
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.testing import CodeRunner, StepClock, wait_until

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

W = WorkflowState
A = ActivityState
CLOCK = StepClock


@pytest.fixture(params=["in_memory", "always_replay"])
def cwb(wb: Whimbrel, request: pytest.FixtureRequest) -> Whimbrel:
    wb.engine.feature(CodeRuns).always_replay = request.param == "always_replay"
    return wb


def _state(wb: Whimbrel, aeid: str, state: ActivityState) -> None:
    wait_until(lambda: (act := wb.engine.store.get_activity(aeid)) is not None
               and act.state is state, timeout=30,
               message=lambda: f"{aeid}: {wb.engine.store.get_activity(aeid)}")


def test_a_sleep_of_a_day_ends_when_the_sweep_finds_it_due(
        cwb: Whimbrel, clock: StepClock) -> None:
    cwb.register_workflow(code.sleeper)
    wx = cwb.start_workflow("sleeper")
    sleep = f"{wx}:sleep#1:1"
    _state(cwb, sleep, A.READY)
    assert cwb.get_activity(sleep).waiting_for is not None
    assert cwb.sweep(clock.advance(86399)).timers_fired == []
    assert cwb.sweep(clock.advance(1)).timers_fired == [sleep]
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.COMPLETED, run
    assert run.output == {"slept": 86400}


def test_signals_sent_early_are_kept_and_received_in_send_order(
        cwb: Whimbrel, clock: StepClock) -> None:
    cwb.register_workflow(code.signals)
    wx = cwb.start_workflow("signals")
    gate = f"{wx}:gate#1:1"
    _state(cwb, gate, A.READY)
    cwb.signal(wx, "paid", {"eur": 1}, signal_id="p1")   # nothing waits yet: kept
    clock.advance(1)
    cwb.signal(wx, "shipped", "dhl", signal_id="s1")
    clock.advance(1)
    cwb.signal(wx, "paid", {"eur": 2}, signal_id="p2")
    cwb.transition_activity(gate, "RUNNING")
    cwb.transition_activity(gate, "COMPLETED")
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.COMPLETED, run
    assert run.output == [{"eur": 1}, {"eur": 2}, "dhl"]
    assert sorted(a.activity_name for a in run.activities) == [
        "gate#1", "signal-paid#1", "signal-paid#2", "signal-shipped#1"]


def test_a_signal_to_a_waiting_code_run_completes_its_wait(
        cwb: Whimbrel, clock: StepClock) -> None:
    cwb.register_workflow(code.signals)
    wx = cwb.start_workflow("signals")
    gate = f"{wx}:gate#1:1"
    _state(cwb, gate, A.READY)
    cwb.transition_activity(gate, "RUNNING")
    cwb.transition_activity(gate, "COMPLETED")
    _state(cwb, f"{wx}:signal-paid#1:1", A.READY)
    cwb.signal(wx, "paid", 1)  # the READY wait takes it in the send's own write
    assert cwb.get_activity(f"{wx}:signal-paid#1:1").output == 1
    _state(cwb, f"{wx}:signal-shipped#1:1", A.READY)
    cwb.signal(wx, "shipped", 3)
    cwb.signal(wx, "paid", 2)
    run = cwb.wait(wx, timeout=30)
    assert run.output == [1, 2, 3]


def test_a_signal_wait_past_its_timeout_raises_wait_timed_out(
        cwb: Whimbrel, clock: StepClock) -> None:
    cwb.register_workflow(code.signal_timeout)
    wx = cwb.start_workflow("signal_timeout")
    _state(cwb, f"{wx}:signal-never#1:1", A.READY)
    cwb.sweep(clock.advance(3600))
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.COMPLETED, run
    assert run.output == {"timed_out": "signal 'never'"}


def test_an_approval_returns_the_decision(cwb: Whimbrel, clock: StepClock) -> None:
    cwb.register_workflow(code.approved)
    wx = cwb.start_workflow("approved")
    wait = f"{wx}:approval#1:1"
    _state(cwb, wait, A.READY)
    cwb.approve(wait, by="alice", comment="ok")
    run = cwb.wait(wx, timeout=30)
    assert run.state is W.COMPLETED, run
    assert run.output["decision"] == cwb.get_activity(wait).output


def test_the_code_runner_skips_the_time_a_run_sleeps(wb: Whimbrel, clock: StepClock) -> None:
    run = CodeRunner(wb, clock).run(code.sleeper)  # a day's sleep, ended at once
    assert run.state is W.COMPLETED, run
    assert run.output == {"slept": 86400}
    assert wb.engine.feature(CodeRuns).always_replay  # every decision replayed cold
