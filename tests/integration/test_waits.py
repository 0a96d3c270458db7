"""Workflows that wait (issue 13): timers, signals and approvals are activities of the DAG
that sit in READY until their time, signal or decision comes. Time is driven by a
stepped clock through ``sweep(now)``; nothing sleeps."""

from __future__ import annotations

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState as A
from whimbrel import (
    InvalidDefinition,
    InvalidInput,
    LauncherSpec,
    NotAnApprover,
    RetryPolicy,
    SignalRefused,
    StateConflict,
    Whimbrel,
    WorkflowDefinition,
    WorkflowNotFound,
)
from whimbrel import WorkflowState as W
from whimbrel.contract.ids import activity_exec_id
from whimbrel.contract.waits import WaitsForEvent, iso
from whimbrel.testing import RecordingLauncher, StepClock, assert_contract_holds

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

LAMBDA = LauncherSpec("lambda", {"function": "f"})


#: The ``clock`` fixture (conftest.py) stands still until the test moves it.
CLOCK = StepClock


def _complete(wb: Whimbrel, aeid: str, output: object = None) -> None:
    wb.transition_activity(aeid, "RUNNING")
    wb.transition_activity(aeid, "COMPLETED", output=output)


def _checked(wb: Whimbrel, wx: str, defn: WorkflowDefinition) -> None:
    assert_contract_holds(wb.get_workflow(wx), defn)


# -- timers -------------------------------------------------------------------------------

def test_a_timer_completes_seconds_after_it_became_ready(
        wb: Whimbrel, clock: StepClock, launched: RecordingLauncher) -> None:
    defn = WorkflowDefinition("cool_off", (
        Act("order"), Act("cool", ("order",), launcher=LauncherSpec.timer(3600)),
        Act("ship", ("cool",), launcher=LAMBDA)))
    wb.register_workflow(defn)
    wx = wb.start_workflow("cool_off")
    clock.advance(100)
    _complete(wb, activity_exec_id(wx, "order", 1))
    cool = wb.get_workflow(wx).activity("cool")
    assert cool.state is A.READY
    assert cool.waiting_for == f"timer:{iso(clock() + 3600)}"
    assert wb.claim(workflow_name="cool_off") is None  # a wait is never claimable
    assert wb.sweep(clock.advance(3599)).timers_fired == []
    report = wb.sweep(clock.advance(1))
    assert report.timers_fired == [cool.activity_exec_id]
    cool = wb.get_activity(cool.activity_exec_id)
    assert cool.state is A.COMPLETED and cool.output == {"fired_at": clock()}
    assert cool.waiting_for is None
    assert [h.state for h in cool.history] == ["REQUESTED", "READY", "RUNNING", "COMPLETED"]
    assert [r.activity_name for r in launched.take()] == ["ship"]
    assert wb.sweep(clock.advance(10)).timers_fired == []  # fires once
    _checked(wb, wx, defn)


def test_a_timer_until_a_time_in_its_input(wb: Whimbrel, clock: StepClock) -> None:
    wb.register_workflow(WorkflowDefinition("deliver", (
        Act("at", launcher=LauncherSpec.timer(until_input="deliver_at")),)))
    when = clock() + 7200
    wx = wb.start_workflow("deliver", {"deliver_at": iso(when)})
    assert wb.get_workflow(wx).activity("at").waiting_for == f"timer:{iso(when)}"
    assert wb.sweep(clock.advance(7199)).timers_fired == []
    assert wb.sweep(clock.advance(1)).timers_fired == [activity_exec_id(wx, "at", 1)]
    assert wb.get_workflow(wx).state is W.COMPLETED
    # An epoch number works as well, and a time already past fires at the next sweep.
    wx2 = wb.start_workflow("deliver", {"deliver_at": clock() - 5})
    assert wb.sweep(clock.advance(1)).timers_fired == [activity_exec_id(wx2, "at", 1)]


def test_a_start_without_the_time_a_timer_needs_is_refused(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("deliver", (
        Act("at", launcher=LauncherSpec.timer(until_input="deliver_at")),)))
    for bad in ({}, {"deliver_at": "next tuesday"}, {"deliver_at": True}, None):
        with pytest.raises(InvalidInput, match="deliver_at"):
            wb.start_workflow("deliver", bad)


def test_wait_definitions_are_checked() -> None:
    bad = WorkflowDefinition("bad", (
        Act("t", launcher={"type": "timer"}),
        Act("u", launcher={"type": "timer", "seconds": 1, "until_input": "x"}),
        Act("s", launcher={"type": "signal", "name": "has space"}),
        Act("a", launcher={"type": "approval", "approvers": "alice", "timeout": 5}),
        Act("h", launcher=LauncherSpec.signal("x"), heartbeat_timeout_seconds=10)))
    with pytest.raises(InvalidDefinition) as info:
        bad.validate()
    text = "; ".join(info.value.problems)
    for expected in ("'t': timer launcher needs exactly one", "'u': timer launcher needs",
                     "'s': signal launcher needs a 'name'", "approvers must be a list",
                     "has no setting 'timeout'", "cannot have heartbeat_timeout_seconds"):
        assert expected in text
    with pytest.raises(TypeError):
        LauncherSpec.timer()  # type: ignore[call-overload]


# -- signals ---------------------------------------------------------------------------------

PAY = WorkflowDefinition("pay", (
    Act("order"),
    Act("payment", ("order",), launcher=LauncherSpec.signal("paid", timeout_seconds=600)),
    Act("ship", ("payment",))))


def test_a_signal_completes_the_wait_with_its_payload(wb: Whimbrel) -> None:
    wb.register_workflow(PAY)
    wx = wb.start_workflow("pay")
    _complete(wb, activity_exec_id(wx, "order", 1))
    payment = wb.get_workflow(wx).activity("payment")
    assert payment.state is A.READY and payment.waiting_for == "signal:paid"
    wb.meter.reset()
    wb.signal(wx, "paid", {"amount": 42}, signal_id="tx-1")
    # One conditional write ends the wait (READY -> RUNNING -> COMPLETED); the rest are
    # its follow-ups (the dependent readied).
    assert wb.meter.calls["UpdateItem"] == 2
    payment = wb.get_activity(payment.activity_exec_id)
    assert payment.state is A.COMPLETED and payment.output == {"amount": 42}
    assert payment.history[-1].by == "signal:tx-1"
    assert wb.get_workflow(wx).activity("ship").state is A.READY
    # The same signal_id again counts once: nothing changes, no error.
    wb.signal(wx, "paid", {"amount": 42}, signal_id="tx-1")
    assert wb.get_activity(payment.activity_exec_id).history == payment.history
    _checked(wb, wx, PAY)


def test_a_signal_sent_before_the_wait_is_kept_until_it_is_ready(wb: Whimbrel) -> None:
    wb.register_workflow(PAY)
    wx = wb.start_workflow("pay")
    wb.signal(wx, "paid", {"amount": 7}, signal_id="early")
    wb.signal(wx, "paid", {"amount": 7}, signal_id="early")  # a resend: still one
    kept = wb.store.signals.list_signals(wx)
    assert [(s.signal_id, s.consumed_by) for s in kept] == [("early", None)]
    assert kept[0].expires_epoch is not None  # every row gets its expiry
    assert wb.get_workflow(wx).activity("payment").state is A.REQUESTED
    _complete(wb, activity_exec_id(wx, "order", 1))
    payment = wb.get_workflow(wx).activity("payment")
    assert payment.state is A.COMPLETED and payment.output == {"amount": 7}
    assert wb.store.signals.list_signals(wx)[0].consumed_by == payment.activity_exec_id
    wb.signal(wx, "paid", {"amount": 7}, signal_id="early")  # after: still counts once
    assert wb.get_activity(payment.activity_exec_id).state is A.COMPLETED
    _checked(wb, wx, PAY)


def test_signals_of_one_name_go_to_waits_in_order_and_count_once(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("two_steps", (
        Act("first", launcher=LauncherSpec.signal("next")),
        Act("second", ("first",), launcher=LauncherSpec.signal("next")),
        Act("done", ("second",))))
    wb.register_workflow(defn)
    wx = wb.start_workflow("two_steps")
    wb.signal(wx, "next", 1, signal_id="s1")
    wf = wb.get_workflow(wx)
    assert wf.activity("first").output == 1 and wf.activity("second").state is A.READY
    wb.signal(wx, "next", 1, signal_id="s1")  # redelivered: must not complete "second"
    assert wb.get_workflow(wx).activity("second").state is A.READY
    wb.signal(wx, "next", 2, signal_id="s2")
    wf = wb.get_workflow(wx)
    assert wf.activity("second").output == 2 and wf.activity("done").state is A.READY
    with pytest.raises(SignalRefused, match="has received one"):
        wb.signal(wx, "next", 3)
    _checked(wb, wx, defn)


def test_bad_signals_are_refused_with_a_clear_error(wb: Whimbrel) -> None:
    wb.register_workflow(PAY)
    wx = wb.start_workflow("pay")
    with pytest.raises(InvalidInput, match=r"waits for signal 'refund'.*waits for: paid"):
        wb.signal(wx, "refund")
    with pytest.raises(InvalidInput, match="name"):
        wb.signal(wx, "no spaces please")
    with pytest.raises(WorkflowNotFound):
        wb.signal("no-such-run", "paid")
    wb.signal(wx, "paid", {"a": 1}, signal_id="once")
    with pytest.raises(SignalRefused, match="signal_id 'once' was sent"):
        wb.signal(wx, "paid", {"a": 2}, signal_id="once")
    with pytest.raises(InvalidInput, match="payload"):
        wb.signal(wx, "paid", {"big": "x" * 70_000})
    assert len(wb.store.signals.list_signals(wx)) == 1
    wb.cancel_workflow(wx)
    with pytest.raises(SignalRefused, match="CANCELLED: it receives no more signals"):
        wb.signal(wx, "paid")
    wb.signal(wx, "paid", {"a": 1}, signal_id="once")  # an old resend is still harmless


def test_a_signal_timeout_follows_the_retry_policy(wb: Whimbrel, clock: StepClock) -> None:
    defn = WorkflowDefinition("patient", (Act("wait", launcher=LauncherSpec.signal(
        "go", timeout_seconds=60), retry=RetryPolicy(max_attempts=2,
                                                     initial_interval_seconds=0)),))
    wb.register_workflow(defn)
    wx = wb.start_workflow("patient")
    first = activity_exec_id(wx, "wait", 1)
    assert wb.sweep(clock.advance(59)).timed_out == []
    assert wb.sweep(clock.advance(1)).timed_out == [first]
    assert "no signal 'go' within its timeout_seconds (60 s)" in (
        wb.get_activity(first).error or "")
    second = wb.get_workflow(wx).activity("wait")
    assert second.attempt == 2 and second.state is A.READY
    wb.signal(wx, "go", "now")
    assert wb.get_workflow(wx).state is W.COMPLETED
    # Without attempts left the workflow fails.
    wx2 = wb.start_workflow("patient")
    wb.sweep(clock.advance(61))
    wb.sweep(clock.advance(61))
    wf = wb.get_workflow(wx2)
    assert wf.state is W.FAILED and "TIMED_OUT after 2 attempt(s)" in (wf.error or "")
    _checked(wb, wx2, defn)


def test_a_wait_moves_only_by_its_event_or_a_cancel(wb: Whimbrel) -> None:
    wb.register_workflow(PAY)
    wx = wb.start_workflow("pay")
    _complete(wb, activity_exec_id(wx, "order", 1))
    payment = activity_exec_id(wx, "payment", 1)
    for verb in ("RUNNING", "PREPARING", "QUEUED"):
        with pytest.raises(WaitsForEvent, match="ends only by a signal"):
            wb.transition_activity(payment, verb)
    assert wb.get_activity(payment).state is A.READY
    wb.transition_activity(payment, "CANCEL")
    wf = wb.get_workflow(wx)
    assert wf.activity("payment").state is A.CANCELLED and wf.state is W.CANCELLED


# -- approvals ---------------------------------------------------------------------------------

GATE = WorkflowDefinition("gate", (
    Act("order"),
    Act("approve", ("order",), launcher=LauncherSpec.approval(
        approvers=("alice", "bob"), timeout_seconds=3600),
        retry=RetryPolicy(max_attempts=3, initial_interval_seconds=0)),
    Act("ship", ("approve",))))


def _at_gate(wb: Whimbrel) -> tuple[str, str]:
    wb.register_workflow(GATE)
    wx = wb.start_workflow("gate")
    _complete(wb, activity_exec_id(wx, "order", 1))
    gate = wb.get_workflow(wx).activity("approve")
    assert gate.state is A.READY and gate.waiting_for == "approval"
    return wx, gate.activity_exec_id


def test_an_approval_completes_the_wait(wb: Whimbrel, clock: StepClock) -> None:
    wx, gate = _at_gate(wb)
    done = wb.approve(gate, by="alice", comment="looks fine")
    assert done.state is A.COMPLETED
    assert done.output == {"approved": True, "by": "alice", "comment": "looks fine",
                           "at": clock()}
    assert wb.get_workflow(wx).activity("ship").state is A.READY
    with pytest.raises(StateConflict):
        wb.reject(gate, by="bob", comment="too late")
    _checked(wb, wx, GATE)


def test_a_rejection_fails_the_workflow_without_retry(wb: Whimbrel) -> None:
    wx, gate = _at_gate(wb)
    failed = wb.reject(gate, by="bob", comment="address missing")
    assert failed.state is A.FAILED and failed.error == "rejected by bob: address missing"
    assert failed.error_type == "Rejected"
    wf = wb.get_workflow(wx)
    assert wf.state is W.FAILED and wf.activity("approve").attempt == 1
    assert "rejected by bob" in (wf.error or "")
    _checked(wb, wx, GATE)


def test_only_the_approvers_may_decide(wb: Whimbrel) -> None:
    wx, gate = _at_gate(wb)
    before = wb.get_activity(gate)
    with pytest.raises(NotAnApprover, match="'mallory' may not decide"):
        wb.approve(gate, by="mallory")
    with pytest.raises(NotAnApprover):
        wb.reject(gate, by="mallory")
    assert wb.get_activity(gate) == before
    with pytest.raises(InvalidInput, match="by"):
        wb.approve(gate, by="  ")
    with pytest.raises(InvalidInput, match="not an approval"):
        wb.approve(activity_exec_id(wx, "order", 1), by="alice")
    early = wb.start_workflow("gate")  # its order has not completed
    with pytest.raises(StateConflict, match="needs READY but it is REQUESTED"):
        wb.approve(activity_exec_id(early, "approve", 1), by="alice")
    assert wb.get_activity(gate) == before


def test_an_approval_timeout_retries_the_question(wb: Whimbrel, clock: StepClock) -> None:
    wx, gate = _at_gate(wb)
    assert wb.sweep(clock.advance(3600)).timed_out == [gate]
    assert "no decision on the approval" in (wb.get_activity(gate).error or "")
    second = wb.get_workflow(wx).activity("approve")
    assert second.attempt == 2 and second.waiting_for == "approval"
    with pytest.raises(StateConflict):
        wb.approve(gate, by="alice")  # the first question timed out
    wb.approve(second.activity_exec_id, by="alice")
    assert wb.get_workflow(wx).activity("ship").state is A.READY


def test_nobody_runs_a_wait(wb: Whimbrel) -> None:
    """The worker's paths refuse a wait as the guards do: ``run_activity`` (RUNNING by
    the actor that runs it) and a worker's COMPLETED."""
    wb.register_workflow(PAY)
    wx = wb.start_workflow("pay")
    _complete(wb, activity_exec_id(wx, "order", 1))
    payment = activity_exec_id(wx, "payment", 1)
    with pytest.raises(WaitsForEvent), wb.run_activity(payment):
        pass
    with pytest.raises(WaitsForEvent):
        wb.engine.moves.start_running(payment)
    assert wb.get_activity(payment).state is A.READY


def test_the_ready_write_says_what_a_wait_waits_for(wb: Whimbrel, clock: StepClock) -> None:
    """What events (issue 15) read off the item: ``waiting_for``, the deadline in
    ``timer_epoch`` and, for an approval that names them, ``approvers``."""
    _, gate = _at_gate(wb)
    item = wb.store.get_activity(gate)
    assert item is not None and item.waiting_for == "approval"
    assert item.approvers == ("alice", "bob") and item.timer_epoch == clock() + 3600
    root = WorkflowDefinition("root_gate", (Act("g", launcher=LauncherSpec.approval(
        approvers=["carol"])),))
    wb.register_workflow(root)
    created = wb.store.get_activity(activity_exec_id(wb.start_workflow("root_gate"), "g", 1))
    assert created is not None and created.approvers == ("carol",)
    assert created.waiting_for == "approval" and created.timer_epoch is None
