"""Issue 31: a result is judged by when it was written, not by a grace on every
deadline. With ``start_to_close_seconds=1`` a 3 s or 5 s step times out (it used to
COMPLETE within the 5 s in-flight grace); a row written before the deadline still counts
however late its stream record is applied; the time-out says how long it really ran.
Every clock is a StepClock: no sleeps."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    ActivityTimedOut,
    StateConflict,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.engine.conditions import Conditions
from whimbrel.engine.intake import Intake, Outcome
from whimbrel.testing import StepClock, assert_contract_holds

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

A, W = ActivityState, WorkflowState
CLOCK = StepClock

CLOSE = WorkflowDefinition("close1", (Act("step", start_to_close_seconds=1),))


def _running(wb: Whimbrel) -> tuple[str, str]:
    wb.register_workflow(CLOSE)
    wx = wb.start_workflow("close1")
    act = wb.claim(workflow_name="close1")
    assert act is not None and act.state is A.RUNNING
    return wx, act.activity_exec_id


@pytest.mark.parametrize("took", [3, 5])
def test_a_step_longer_than_start_to_close_times_out(wb: Whimbrel, clock: StepClock,
                                                      took: float) -> None:
    wx, aeid = _running(wb)
    clock.advance(took)  # no sweep ran yet: the result itself is judged
    with pytest.raises(ActivityTimedOut) as late:
        wb.transition_activity(aeid, Transition.COMPLETED, output={"n": 1})
    assert late.value.kept
    got = wb.get_activity(aeid)
    assert got.state is A.TIMED_OUT, got
    assert got.error == f"ran for {took:.1f} s, past its start_to_close_seconds (1 s)"
    assert got.late_output == {"n": 1} and got.late_epoch == clock()
    wf = wb.get_workflow(wx)
    assert wf.state is W.FAILED, wf
    assert_contract_holds(wf, CLOSE)


def test_a_worker_whose_step_ran_too_long_ends_timed_out(wb: Whimbrel,
                                                         clock: StepClock) -> None:
    """The in-process worker path: the end write itself is judged."""
    _, aeid = _running(wb)
    with wb.run_activity(aeid) as run:
        clock.advance(3)
        run.output = "done"
    got = wb.get_activity(aeid)
    assert got.state is A.TIMED_OUT and got.late_output == "done", got
    assert "ran for 3.0 s" in (got.error or "")


def test_a_result_in_time_completes(wb: Whimbrel, clock: StepClock) -> None:
    _, aeid = _running(wb)
    clock.advance(0.5)
    assert wb.transition_activity(aeid, Transition.COMPLETED).state is A.COMPLETED


def test_the_sweeps_time_out_says_how_long_it_really_ran(wb: Whimbrel,
                                                        clock: StepClock) -> None:
    _, aeid = _running(wb)
    grace = wb.engine.in_flight_grace_seconds
    assert wb.sweep(clock.advance(1 + grace / 2)).timed_out == []  # rows may be in flight
    report = wb.sweep(clock.advance(grace))
    assert report.timed_out == [aeid]
    ran = 1 + grace / 2 + grace
    assert wb.get_activity(aeid).error == \
        f"ran for {ran:.1f} s, past its start_to_close_seconds (1 s)"  # was 1 + grace/2


def test_end_workflow_past_the_deadline_times_out(wb: Whimbrel, clock: StepClock) -> None:
    wx, aeid = _running(wb)
    clock.advance(3)
    with pytest.raises(StateConflict) as lost:
        wb.engine.feature(Conditions).end_early(aeid, {"early": True})
    assert lost.value.actual == "TIMED_OUT"
    wf = wb.get_workflow(wx)
    assert wf.state is W.FAILED and wf.ended_by is None


# -- rows: judged by the stream record's creation time -------------------------------------

def _row(aeid: str, verb: str, written: float, output: str | None = None) -> dict[str, Any]:
    image: dict[str, Any] = {"activity_event_id": {"S": str(uuid.uuid4())},
                             "activity_exec_id": {"S": aeid}, "transition": {"S": verb},
                             "when_epoch": {"N": str(written)}}
    if output is not None:
        image["output"] = {"S": output}
    return {"eventName": "INSERT", "eventID": str(uuid.uuid4()),
            "dynamodb": {"NewImage": image, "ApproximateCreationDateTime": written}}


def test_a_row_written_in_time_counts_however_late_it_is_applied(wb: Whimbrel,
                                                                 clock: StepClock) -> None:
    _, aeid = _running(wb)
    written = clock() + 0.5
    clock.advance(3)  # the record reaches the intake 2.5 s after the deadline
    done = Intake(wb.engine).activity_event(_row(aeid, "COMPLETED", written, '"ok"'))
    assert (done.outcome, done.new_state) == (Outcome.APPLIED, "COMPLETED"), done
    assert wb.get_activity(aeid).output == "ok"


def test_a_row_written_past_the_deadline_is_late_output(wb: Whimbrel,
                                                        clock: StepClock) -> None:
    _, aeid = _running(wb)
    written = clock() + 3
    clock.advance(3.2)  # before any sweep: the row's own time says it came late
    late = Intake(wb.engine).activity_event(_row(aeid, "COMPLETED", written, '"slow"'))
    assert (late.outcome, late.new_state) == (Outcome.LATE_OUTPUT, "TIMED_OUT"), late
    got = wb.get_activity(aeid)
    assert got.state is A.TIMED_OUT and got.late_output == "slow"
    assert got.late_epoch == written and "ran for 3.0 s" in (got.error or "")


# -- heartbeats: judged alike --------------------------------------------------------------

BEATING = WorkflowDefinition("beat10", (Act("step", heartbeat_timeout_seconds=10),))


def test_a_heartbeat_past_its_deadline_times_the_attempt_out(wb: Whimbrel,
                                                             clock: StepClock) -> None:
    wb.register_workflow(BEATING)
    wb.start_workflow("beat10")
    act = wb.claim(workflow_name="beat10")
    assert act is not None
    clock.advance(9)
    wb.heartbeat(act.activity_exec_id)  # in time: the deadline moves to 19
    clock.advance(12)  # 2 s past it, within the sweep's grace: it used to revive it
    with pytest.raises(ActivityTimedOut):
        wb.heartbeat(act.activity_exec_id)
    got = wb.get_activity(act.activity_exec_id)
    assert got.state is A.TIMED_OUT and got.error == "no heartbeat for 12.0 s (timeout 10 s)"


def test_a_heartbeat_row_written_in_time_counts_however_late(wb: Whimbrel,
                                                             clock: StepClock) -> None:
    wb.register_workflow(BEATING)
    wb.start_workflow("beat10")
    act = wb.claim(workflow_name="beat10")
    assert act is not None
    written = clock() + 9
    clock.advance(11)
    beat = Intake(wb.engine).activity_event(_row(act.activity_exec_id, "HEARTBEAT", written))
    assert (beat.outcome, beat.new_state) == (Outcome.APPLIED, "RUNNING"), beat
    late = Intake(wb.engine).activity_event(
        _row(act.activity_exec_id, "HEARTBEAT", clock.advance(12)))
    assert late.outcome is Outcome.REJECTED and "too late" in (late.reason or ""), late
    assert wb.get_activity(act.activity_exec_id).state is A.TIMED_OUT
