"""A timed-out attempt keeps its pool slot while its code may still run (issue 31) on
DynamoDB Local: until its late report, or while it heartbeats, or — with no heartbeat —
as long again as its start_to_close_seconds; then the slot goes, so a dead process
never wedges its pool."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import wb_pool_activities as gated

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    ActivityTimedOut,
    LauncherSpec,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.testing import StepClock, wait_until

CLOCK = StepClock
A = ActivityState


@pytest.fixture(autouse=True)
def _gate() -> Iterator[None]:
    gated.reset()
    yield
    gated.GATE.set()  # never leave a thread waiting


def pooled(launcher: LauncherSpec, hb: float | None = None) -> WorkflowDefinition:
    return WorkflowDefinition("w", (ActivityDefinition(
        "a", launcher=launcher, pool="one", start_to_close_seconds=10,
        heartbeat_timeout_seconds=hb),))


def state(wb: Whimbrel, wx: str) -> tuple[ActivityState, str | None]:
    act = wb.get_workflow(wx).activity("a")
    return act.state, act.pool_wait


def test_a_timed_out_python_attempt_keeps_its_slot_until_its_code_stops(
        wb: Whimbrel, clock: StepClock) -> None:
    """Before: the time-out gave the slot away while the code still ran, and a 1-slot
    pool ran two at once."""
    wb.set_pool("one", slots=1, per_second=None)
    wb.register_workflow(pooled(LauncherSpec.python("wb_pool_activities:gated")))
    first = wb.start_workflow("w")
    wait_until(lambda: gated.NOW[0] == 1, message="the first attempt's code runs")
    second = wb.start_workflow("w")
    assert state(wb, second) == (A.READY, "one")
    clock.advance(16)  # past its close (and any grace a sweep gives a deadline)
    wb.sweep()
    assert state(wb, first)[0] is A.TIMED_OUT
    wb.sweep()
    assert state(wb, second) == (A.READY, "one")  # its code runs on: the slot is its own
    assert wb.get_pool("one").in_use == 1
    gated.GATE.set()  # the code stops: its late report gives the slot back
    wait_until(lambda: state(wb, second)[0] is A.COMPLETED, message="the second ran")
    assert list(gated.STARTED) == [first, second]
    assert gated.MOST[0] == 1
    assert wb.get_pool("one").in_use == 0


def test_a_timed_out_holder_that_shows_no_life_gives_its_slot_back(
        wb: Whimbrel, clock: StepClock) -> None:
    """A worker that died after its claim: no late report will come. Without a
    heartbeat the slot is kept as long again as start_to_close_seconds past the close."""
    wb.set_pool("one", slots=1, per_second=None)
    wb.register_workflow(pooled(LauncherSpec.external()))
    first = wb.start_workflow("w")
    second = wb.start_workflow("w")
    claimed = wb.claim()
    assert claimed is not None and claimed.workflow_exec_id == first
    clock.advance(16)
    wb.sweep()
    assert state(wb, first)[0] is A.TIMED_OUT
    assert state(wb, second) == (A.READY, "one")
    clock.advance(5)  # close + 11 s: the worker is taken for dead
    wb.sweep()
    assert state(wb, second) == (A.READY, None)  # admitted: claimable
    got = wb.claim()
    assert got is not None and got.workflow_exec_id == second


def test_a_timed_out_holder_keeps_its_slot_while_it_heartbeats(
        wb: Whimbrel, clock: StepClock) -> None:
    wb.set_pool("one", slots=1, per_second=None)
    wb.register_workflow(pooled(LauncherSpec.external(), hb=30))
    first = wb.start_workflow("w")
    second = wb.start_workflow("w")
    claimed = wb.claim()
    assert claimed is not None and claimed.workflow_exec_id == first
    clock.advance(16)  # past its close
    wb.sweep()
    assert state(wb, first)[0] is A.TIMED_OUT
    clock.advance(4)
    with pytest.raises(ActivityTimedOut):
        wb.heartbeat(claimed.activity_exec_id)  # recorded; its state stays
    clock.advance(25)  # 25 s after that beat: within its heartbeat timeout
    wb.sweep()
    assert state(wb, second) == (A.READY, "one")
    clock.advance(6)  # no beat for 31 s: gone
    wb.sweep()
    assert state(wb, second) == (A.READY, None)
