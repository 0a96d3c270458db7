"""Changing a pool's limits (issue 31) on DynamoDB Local: a lowered ``slots`` admits
nothing until the slots held are below it, and a pool wait that times out says what it
waited for."""

from __future__ import annotations

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    LauncherSpec,
    Transition,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.engine.pools import Pools
from whimbrel.testing import RecordingLauncher, StepClock

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

CLOCK = StepClock
A = ActivityState
LAMBDA = LauncherSpec("lambda", {"function": "f"})


def pooled(launcher: LauncherSpec = LAMBDA, **kw: float) -> WorkflowDefinition:
    return WorkflowDefinition("w", (ActivityDefinition("a", launcher=launcher, pool="p",
                                                       **kw),))  # type: ignore[arg-type]


def act_state(wb: Whimbrel, wx: str) -> ActivityState:
    return wb.get_workflow(wx).activity("a").state


def finish(wb: Whimbrel, wx: str) -> None:
    aeid = wb.get_workflow(wx).activity("a").activity_exec_id
    wb.transition_activity(aeid, Transition.RUNNING)
    wb.transition_activity(aeid, Transition.COMPLETED)


def test_a_lowered_limit_admits_nothing_until_held_is_below_it(
        wb: Whimbrel, launched: RecordingLauncher) -> None:
    """Before: lowering 3 to 1 freed slot 0 for the next waiter at the first end, with
    the two slots above the limit still held (three ran under a limit of one)."""
    wb.set_pool("p", slots=3, per_second=None)
    wb.register_workflow(pooled())
    runs = [wb.start_workflow("w") for _ in range(5)]
    assert [act_state(wb, wx) for wx in runs] == [A.QUEUED] * 3 + [A.READY] * 2
    wb.set_pool("p", slots=1, per_second=None)
    launched.take()
    # The holder of slot 0 (the one slot left under the limit) ends first.
    holders = sorted(runs[:3], key=lambda wx: str(wb.get_workflow(wx).activity("a").pool_slot))
    finish(wb, holders[0])
    info = wb.get_pool("p")
    assert (info.in_use, info.waiting) == (2, 2)  # two held: not below the limit of 1
    finish(wb, holders[1])
    info = wb.get_pool("p")
    assert (info.in_use, info.waiting) == (1, 2)  # one held: not below the limit of 1
    assert launched.take() == []
    finish(wb, holders[2])  # none held: one goes
    assert [act_state(wb, wx) for wx in runs[3:]].count(A.QUEUED) == 1
    assert (wb.get_pool("p").in_use, wb.get_pool("p").waiting) == (1, 1)
    assert len(launched.take()) == 1
    # Drained: the next admission reads nothing above the limit any more.
    assert wb.store.pools.get_pool_settings("p").slots_high == 1  # type: ignore[union-attr]
    nxt = next(wx for wx in runs[3:] if act_state(wb, wx) is A.QUEUED)
    finish(wb, nxt)
    assert [act_state(wb, wx) for wx in runs[3:]].count(A.COMPLETED) == 1
    assert [act_state(wb, wx) for wx in runs[3:]].count(A.QUEUED) == 1


def test_a_pool_wait_that_times_out_says_it_waited_for_the_pool(
        wb: Whimbrel, clock: StepClock) -> None:
    """Before: "nobody claimed it within schedule_to_start_seconds"."""
    wb.set_pool("p", slots=1, per_second=None)
    wb.register_workflow(pooled(LauncherSpec.external(), schedule_to_start_seconds=5))
    first = wb.start_workflow("w")
    second = wb.start_workflow("w")
    assert wb.get_workflow(second).activity("a").pool_wait == "p"
    claimed = wb.claim()
    assert claimed is not None and claimed.workflow_exec_id == first
    clock.advance(12)
    wb.sweep()
    waited = wb.get_workflow(second).activity("a")
    assert waited.state is A.TIMED_OUT
    assert "waited for a slot of pool 'p'" in (waited.error or "")
    assert "nobody claimed" not in (waited.error or "")


def test_a_rate_is_used_in_full_by_short_work(wb: Whimbrel, clock: StepClock,
                                              launched: RecordingLauncher) -> None:
    """per_second=10 and 50 ms of work, on a clock the test drives: about 10 starts a
    second, never more. Before: the first second's burst, then nothing until a sweep
    (every attempt ended before the next token, so no end found one): 10 in 5 s."""
    wb.set_pool("p", slots=None, per_second=10)
    wb.register_workflow(pooled())
    pacer = wb.engine.feature(Pools).queue.pacer
    t0 = clock.now
    for _ in range(70):
        wb.start_workflow("w")
    burst = launched.take()
    starts: list[float] = [t0] * len(burst)
    running = [r.activity_exec_id for r in burst]
    while clock.now < t0 + 5:
        clock.advance(0.05)
        for aeid in running:  # 50 ms of work: each ends, which looks for a token
            wb.transition_activity(aeid, Transition.RUNNING)
            wb.transition_activity(aeid, Transition.COMPLETED)
        pacer.run_due()  # what the pacer thread does when a token is due
        new = launched.take()
        starts += [clock.now] * len(new)
        running = [r.activity_exec_id for r in new]
    in_five = len(starts)
    print(f"\nper_second=10, 50 ms work: {in_five} starts in 5 s of clock "
          f"({(in_five - 10) / 5:.1f}/s after the first second's burst of 10)")
    assert in_five >= 55  # 10 + 10/s: at least 9/s of the rate used
    for i, at in enumerate(starts):  # never over the rate: a burst of 10, then 10/s
        assert i + 1 <= 10 + 10 * (at - t0) + 1e-3  # (epoch floats: 2.4e-7 s)
