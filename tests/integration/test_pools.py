"""Pools, max_running and priority (issue 22, items 1 and 2) on DynamoDB Local, through
the Python API: limits hold, slots come back on every kind of end, waiters go in
priority order, a rate is paced by the clock (driven, never slept)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    InvalidDefinition,
    InvalidInput,
    LauncherSpec,
    PoolNotFound,
    RedriveNotAllowed,
    RetryPolicy,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
    workflow_exec_id_for,
)
from whimbrel.contract.pools import run_pool
from whimbrel.engine.pools import WaitsForPool
from whimbrel.testing import RecordingLauncher, StepClock

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

CLOCK = StepClock
A = ActivityState
W = WorkflowState
LAMBDA = LauncherSpec("lambda", {"function": "f"})


def one(name: str, *, pool: str | None = None, priority: int = 5, pull: bool = False,
        max_running: int | None = None, attempts: int = 1,
        hb: float | None = None) -> WorkflowDefinition:
    return WorkflowDefinition(name, (ActivityDefinition(
        "a", launcher=LauncherSpec.external() if pull else LAMBDA, pool=pool,
        priority=priority, heartbeat_timeout_seconds=hb,
        retry=RetryPolicy(max_attempts=attempts, initial_interval_seconds=1.0)),),
        max_running=max_running)


def attempt(wb: Whimbrel, wx: str) -> tuple[str, ActivityState]:
    act = wb.get_workflow(wx).activity("a")
    return act.activity_exec_id, act.state


def run_to_end(wb: Whimbrel, aeid: str, verb: Transition = Transition.COMPLETED) -> None:
    wb.transition_activity(aeid, Transition.RUNNING)
    wb.transition_activity(aeid, verb, output={"ok": 1}, error="boom")


# -- pools of activities -----------------------------------------------------------------


def test_a_full_pool_holds_attempts_ready_and_a_release_launches_the_next(
        wb: Whimbrel, launched: RecordingLauncher) -> None:
    wb.set_pool("api", slots=1, per_second=None)
    wb.register_workflow(one("w", pool="api"))
    first, second = wb.start_workflow("w"), wb.start_workflow("w")
    a1, s1 = attempt(wb, first)
    a2, s2 = attempt(wb, second)
    assert (s1, s2) == (A.QUEUED, A.READY)
    assert wb.get_workflow(second).activity("a").pool_wait == "api"
    assert [r.activity_exec_id for r in launched.take()] == [a1]
    info = wb.get_pool("api")
    assert (info.slots, info.in_use, info.waiting) == (1, 1, 1)
    run_to_end(wb, a1)
    assert attempt(wb, second)[1] is A.QUEUED
    assert [r.activity_exec_id for r in launched.take()] == [a2]
    assert wb.get_workflow(second).activity("a").pool_slot == "api#0"
    run_to_end(wb, a2)
    info = wb.get_pool("api")
    assert (info.in_use, info.waiting) == (0, 0)
    assert launched.doubled() == []


@pytest.mark.parametrize("end", ["failed", "cancelled", "timed_out"])
def test_every_kind_of_end_gives_the_slot_back(wb: Whimbrel, launched: RecordingLauncher,
                                               clock: StepClock, end: str) -> None:
    wb.set_pool("p", slots=1, per_second=None)
    wb.register_workflow(one("w", pool="p", hb=10.0))
    first, second = wb.start_workflow("w"), wb.start_workflow("w")
    a1, _ = attempt(wb, first)
    wb.transition_activity(a1, Transition.RUNNING)
    if end == "failed":
        wb.transition_activity(a1, Transition.FAILED, error="boom")
    elif end == "cancelled":
        wb.cancel_workflow(first)  # CANCELLED_RUNNING: it still holds its slot
        assert attempt(wb, second)[1] is A.READY
        wb.transition_activity(a1, Transition.COMPLETED)  # it stops: CANCELLED
    else:
        clock.advance(60)
        wb.sweep()
    assert attempt(wb, first)[1] is not A.RUNNING
    assert attempt(wb, second)[1] is A.QUEUED
    assert wb.get_pool("p").in_use == 1


def test_a_cancelled_waiter_leaves_and_the_next_one_goes(wb: Whimbrel) -> None:
    wb.set_pool("p", slots=1, per_second=None)
    wb.register_workflow(one("w", pool="p"))
    first, second, third = (wb.start_workflow("w") for _ in range(3))
    wb.cancel_workflow(second)
    assert wb.get_workflow(second).state is W.CANCELLED
    run_to_end(wb, attempt(wb, first)[0])
    assert attempt(wb, third)[1] is A.QUEUED
    assert wb.get_pool("p").waiting == 0


def test_waiters_go_by_priority_then_oldest(wb: Whimbrel, clock: StepClock) -> None:
    wb.set_pool("p", slots=1, per_second=None)
    wb.register_workflow(one("w", pool="p"))
    wb.register_workflow(one("urgent", pool="p", priority=1))
    blocker = wb.start_workflow("w")
    runs = []
    for name, prio in (("w", 5), ("w", None), ("w", 3), ("urgent", None), ("w", 3)):
        clock.advance(1)
        runs.append(wb.start_workflow(name, priority=prio))
    order = []
    current = blocker
    for _ in runs:
        run_to_end(wb, attempt(wb, current)[0])
        current = next(wx for wx in runs if attempt(wb, wx)[1] is A.QUEUED)
        order.append(runs.index(current))
    # urgent (activity priority 1), then the two run priorities 3 (oldest first), then
    # the two 5s (oldest first).
    assert order == [3, 2, 4, 0, 1]


def test_a_pull_attempt_is_claimable_only_with_a_slot(wb: Whimbrel) -> None:
    wb.set_pool("workers", slots=1, per_second=None)
    wb.register_workflow(one("w", pool="workers", pull=True))
    first, second = wb.start_workflow("w"), wb.start_workflow("w")
    claimed = wb.claim(workflow_name="w")
    assert claimed is not None and claimed.workflow_exec_id == first
    assert wb.claim(workflow_name="w") is None  # the second waits for the slot
    wb.transition_activity(claimed.activity_exec_id, Transition.COMPLETED, output={"ok": 1})
    again = wb.claim(workflow_name="w")
    assert again is not None and again.workflow_exec_id == second


def test_a_rate_paces_starts_by_the_clock(wb: Whimbrel, launched: RecordingLauncher,
                                          clock: StepClock) -> None:
    wb.set_pool("api", slots=None, per_second=1.0)
    wb.register_workflow(one("w", pool="api"))
    runs = [wb.start_workflow("w") for _ in range(4)]
    assert len(launched.take()) == 1  # a burst of one second's worth
    for _ in range(3):
        wb.sweep()  # nothing new before a token is there
        assert launched.take() == []
        clock.advance(1.0)
        wb.sweep()  # the pool's pacer: one more
        assert len(launched.take()) == 1
    assert all(attempt(wb, wx)[1] is A.QUEUED for wx in runs)


def test_raising_slots_lets_waiters_in_at_once(wb: Whimbrel, launched: RecordingLauncher) -> None:
    wb.set_pool("p", slots=0, per_second=None)  # closed
    wb.register_workflow(one("w", pool="p"))
    runs = [wb.start_workflow("w") for _ in range(3)]
    assert launched.take() == []
    wb.set_pool("p", slots=2, per_second=None)
    assert len(launched.take()) == 2
    assert sorted(attempt(wb, wx)[1] for wx in runs) == [A.QUEUED, A.QUEUED, A.READY]


def test_pools_are_listed_and_bad_pools_are_refused(wb: Whimbrel) -> None:
    wb.set_pool("b", slots=3, per_second=2.5)
    wb.set_pool("a", slots=None, per_second=None)
    assert [(p.name, p.slots, p.per_second) for p in wb.list_pools()] == [
        ("a", None, None), ("b", 3, 2.5)]
    for kwargs in ({"slots": -1, "per_second": None}, {"slots": 1.5, "per_second": None},
                   {"slots": None, "per_second": 0}, {"slots": None, "per_second": "2"},
                   {"slots": True, "per_second": None}):
        with pytest.raises(InvalidInput):
            wb.set_pool("c", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        wb.set_pool("no spaces", slots=1, per_second=None)
    with pytest.raises(PoolNotFound):
        wb.get_pool("c")
    assert [p.name for p in wb.list_pools()] == ["a", "b"]
    with pytest.raises(InvalidDefinition, match="pool 'nope' does not exist"):
        wb.register_workflow(one("w", pool="nope"))


# -- max_running ---------------------------------------------------------------------------


def test_max_running_queues_runs_and_starts_them_in_order(wb: Whimbrel,
                                                          clock: StepClock) -> None:
    wb.register_workflow(one("w", max_running=1))
    runs = []
    for prio in (None, 7, 2, None):
        clock.advance(1)
        runs.append(wb.start_workflow("w", priority=prio))
    assert [wb.get_workflow(wx).state for wx in runs] == [W.RUNNING, W.QUEUED, W.QUEUED,
                                                          W.QUEUED]
    assert wb.get_workflow(runs[1]).activities == ()  # nothing of it exists yet
    queued = wb.list_workflows(name="w", state="QUEUED")
    assert sorted(r.workflow_exec_id for r in queued.items) == sorted(runs[1:])
    assert wb.count_workflows(name="w", state="QUEUED") == 3
    order = [0]
    for _ in range(3):
        run_to_end(wb, attempt(wb, runs[order[-1]])[0])
        running = [i for i, wx in enumerate(runs) if wb.get_workflow(wx).state is W.RUNNING]
        assert len(running) == 1
        order.append(running[0])
    assert order == [0, 2, 3, 1]
    history = [h.state for h in wb.get_workflow(runs[1]).history]
    assert history[:3] == ["REQUESTED", "QUEUED", "RUNNING"]


def test_a_queued_run_can_be_cancelled_and_times_out(wb: Whimbrel, clock: StepClock) -> None:
    act = replace(one("w").activities[0], start_timeout_seconds=3600)
    wb.register_workflow(WorkflowDefinition("w", (act,), max_running=1, timeout_seconds=600))
    first, second, third = (wb.start_workflow("w") for _ in range(3))
    wb.cancel_workflow(second)
    assert wb.get_workflow(second).state is W.CANCELLED
    assert [h.state for h in wb.get_workflow(second).history] == [
        "REQUESTED", "QUEUED", "CANCEL_REQUESTED", "CANCELLED"]
    clock.advance(601)  # both deadlines pass: the running run's and the queued one's
    wb.sweep()
    assert wb.get_workflow(first).state is W.TIMED_OUT
    assert wb.get_workflow(third).state is W.TIMED_OUT
    assert "QUEUED" in [h.state for h in wb.get_workflow(third).history]
    assert wb.store.pools.held_slots(run_pool("w"), 1) == []
    assert wb.store.pools.waiter_heads(run_pool("w")) == []


def test_redrive_takes_a_run_slot_or_is_refused(wb: Whimbrel) -> None:
    wb.register_workflow(one("w", max_running=1))
    first = wb.start_workflow("w")
    run_to_end(wb, attempt(wb, first)[0], Transition.FAILED)
    assert wb.get_workflow(first).state is W.FAILED
    second = wb.start_workflow("w")
    assert wb.get_workflow(second).state is W.RUNNING
    with pytest.raises(RedriveNotAllowed, match="max_running"):
        wb.redrive_workflow(first)
    run_to_end(wb, attempt(wb, second)[0])
    wb.redrive_workflow(first)
    assert wb.get_workflow(first).state is W.RUNNING
    assert wb.store.get_workflow(first).pool_slot == "run:w#0"  # type: ignore[union-attr]
    assert wb.get_workflow(wb.start_workflow("w")).state is W.QUEUED


def test_a_bad_priority_is_refused_and_nothing_starts(wb: Whimbrel) -> None:
    wb.register_workflow(one("w"))
    for bad in (-1, 10, 2.5, True, "1"):
        with pytest.raises(InvalidInput, match="priority"):
            wb.start_workflow("w", priority=bad, request_id="bad")  # type: ignore[arg-type]
    assert wb.store.get_workflow(workflow_exec_id_for("bad")) is None



def test_claim_serves_the_most_urgent_then_the_oldest(wb: Whimbrel, clock: StepClock) -> None:
    wb.register_workflow(one("w", pull=True))
    wb.register_workflow(one("hot", pull=True, priority=0))
    runs = []
    for name, prio in (("w", 6), ("w", 7), ("w", 2), ("hot", None), ("w", 6)):
        clock.advance(1)
        runs.append(wb.start_workflow(name, priority=prio))
    order = []
    for _ in runs:
        claimed = wb.claim()
        assert claimed is not None
        order.append(runs.index(claimed.workflow_exec_id))
    assert order == [3, 2, 0, 4, 1]
    assert wb.claim() is None
    # Aging: a priority-9 run waiting 45 minutes goes before fresh priority-0 work.
    old = wb.start_workflow("w", priority=9)
    clock.advance(9 * 300 + 1)
    wb.start_workflow("hot")
    first = wb.claim()
    assert first is not None and first.workflow_exec_id == old


def test_a_caller_cannot_start_what_its_pool_holds(wb: Whimbrel,
                                                   launched: RecordingLauncher) -> None:
    wb.set_pool("p", slots=1, per_second=None)
    wb.register_workflow(one("push", pool="p"))
    wb.register_workflow(one("pull", pool="p", pull=True))
    first, held_push, held_pull = (wb.start_workflow(n) for n in ("push", "push", "pull"))
    for wx in (held_push, held_pull):
        aeid, state = attempt(wb, wx)
        assert state is A.READY
        for verb in (Transition.RUNNING, Transition.QUEUED, Transition.PREPARING):
            with pytest.raises(WaitsForPool, match="waits for pool 'p'"):
                wb.transition_activity(aeid, verb)
        assert attempt(wb, wx)[1] is A.READY
    assert wb.claim(workflow_name="pull") is None
    wb.transition_activity(attempt(wb, held_pull)[0], Transition.CANCEL)  # CANCEL is fine
    run_to_end(wb, attempt(wb, first)[0])
    assert attempt(wb, held_push)[1] is A.QUEUED
    assert wb.get_workflow(held_pull).state is W.CANCELLED
    assert launched.doubled() == []


def test_a_suspended_run_waits_for_its_pool_on_resume(wb: Whimbrel) -> None:
    wb.set_pool("p", slots=1, per_second=None)
    wb.register_workflow(WorkflowDefinition("two", (
        ActivityDefinition("a", launcher=LauncherSpec.external()),
        ActivityDefinition("b", ("a",), launcher=LauncherSpec.external(), pool="p"))))
    wb.register_workflow(one("hog", pool="p", pull=True))
    wx, hog = wb.start_workflow("two"), wb.start_workflow("hog")
    a = wb.claim(workflow_name="two")
    assert a is not None
    wb.suspend_workflow(wx)
    wb.transition_activity(a.activity_exec_id, Transition.COMPLETED)  # b: READY, held
    wb.resume_workflow(wx)  # the slot is the hog's: b stays out of the claimable index
    assert wb.claim(workflow_name="two") is None
    got = wb.claim(workflow_name="hog")
    assert got is not None
    wb.transition_activity(got.activity_exec_id, Transition.COMPLETED)
    b = wb.claim(workflow_name="two")
    assert b is not None and b.activity_name == "b"
    assert wb.get_workflow(hog).state is W.COMPLETED


def test_a_rate_only_pool_and_an_unlimited_one_mark_what_they_admitted(
        wb: Whimbrel, clock: StepClock) -> None:
    wb.set_pool("rated", slots=None, per_second=1.0)
    wb.set_pool("free", slots=None, per_second=None)
    wb.register_workflow(one("r", pool="rated", pull=True))
    wb.register_workflow(one("f", pool="free", pull=True))
    admitted, held, free = wb.start_workflow("r"), wb.start_workflow("r"), wb.start_workflow("f")
    assert wb.get_workflow(admitted).activity("a").pool_slot == "rated"
    assert wb.get_workflow(held).activity("a").pool_wait == "rated"
    assert wb.get_workflow(free).activity("a").pool_slot == "free"
    with pytest.raises(WaitsForPool):
        wb.transition_activity(attempt(wb, held)[0], Transition.RUNNING)
    # Suspended and resumed, an admitted one is claimable again without a second token.
    wb.suspend_workflow(admitted)
    wb.resume_workflow(admitted)
    got = wb.claim(workflow_name="r")
    assert got is not None and got.workflow_exec_id == admitted
    assert wb.claim(workflow_name="r") is None  # the other still waits for a token
    clock.advance(1.0)
    wb.sweep()  # the pacer: a token is there
    again = wb.claim(workflow_name="r")
    assert again is not None and again.workflow_exec_id == held
    wb.transition_activity(attempt(wb, free)[0], Transition.RUNNING)  # no limit: allowed


def test_a_lost_holder_gives_its_slot_back_through_the_sweep(
        wb: Whimbrel, launched: RecordingLauncher, clock: StepClock) -> None:
    wb.set_pool("p", slots=1, per_second=None)
    wb.register_workflow(one("w", pool="p", hb=30.0, attempts=1))
    first, second = wb.start_workflow("w"), wb.start_workflow("w")
    holder = attempt(wb, first)[0]
    wb.transition_activity(holder, Transition.RUNNING)
    # An operator's mistake: a raw DeleteItem of the holder's row (no end, no release).
    wb.store.tables.client.call("DeleteItem", {
        "TableName": f"{wb.table_prefix}activity_exec",
        "Key": {"workflow_exec_id": {"S": first}, "activity_exec_id": {"S": holder}}})
    assert attempt(wb, second)[1] is A.READY
    for _ in range(6):  # the run's reconcile visit (LOST), then the slot's check come due
        clock.advance(130)
        wb.sweep()
        if attempt(wb, second)[1] is not A.READY:
            break
    assert wb.get_workflow(first).activity("a").state is A.LOST
    assert attempt(wb, second)[1] is A.QUEUED  # the slot came back and went on
    assert wb.store.pools.get_slot("p", 0).holder == attempt(wb, second)[0]
    assert launched.doubled() == []
