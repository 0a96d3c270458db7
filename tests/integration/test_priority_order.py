"""Priority in claims and pool waits (issue 31) on DynamoDB Local: a later priority never
goes before default work whatever shards a claim reads first, and aging counts the
attempt's wait (from its READY write), not its run's age."""

from __future__ import annotations

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    LauncherSpec,
    Transition,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.testing import RecordingLauncher, StepClock

CLOCK = StepClock
A = ActivityState
PULL = LauncherSpec.external()
LAMBDA = LauncherSpec("lambda", {"function": "f"})


def pulled(name: str, priority: int = 5) -> WorkflowDefinition:
    return WorkflowDefinition(name, (ActivityDefinition("a", launcher=PULL,
                                                        priority=priority),))


def chain(name: str, launcher: LauncherSpec, pool: str | None = None) -> WorkflowDefinition:
    """``up`` (pulled) then ``a``: ``a`` becomes READY only when ``up`` completes."""
    return WorkflowDefinition(name, (
        ActivityDefinition("up", launcher=PULL),
        ActivityDefinition("a", launcher=launcher, depends_on=("up",), pool=pool)))


def test_a_later_priority_never_goes_before_default_work(wb: Whimbrel,
                                                         clock: StepClock) -> None:
    """Before: every non-default priority went to the shards each claim reads first, so
    a priority-9 attempt was claimed before a default one in 15 of 16 tries."""
    wb.register_workflow(pulled("w"))
    for _ in range(16):
        last = wb.start_workflow("w", priority=9)  # the older of the two
        clock.advance(1)
        default = wb.start_workflow("w")
        got = [wb.claim(), wb.claim()]
        assert [c.workflow_exec_id if c else None for c in got] == [default, last]
        for c in got:
            assert c is not None
            wb.transition_activity(c.activity_exec_id, Transition.COMPLETED)
    # 9, 5 and 0 started in that order are served 0, 5, 9 (was 0, 9, 5).
    for _ in range(4):
        runs = []
        for prio in (9, 5, 0):
            runs.append(wb.start_workflow("w", priority=prio))
            clock.advance(1)
        order = []
        while (c := wb.claim()) is not None:
            order.append(runs.index(c.workflow_exec_id))
            wb.transition_activity(c.activity_exec_id, Transition.COMPLETED)
        assert order == [2, 1, 0]


def test_a_later_priority_goes_when_no_default_work_waits_or_once_it_aged(
        wb: Whimbrel, clock: StepClock) -> None:
    wb.register_workflow(pulled("w"))
    alone = wb.start_workflow("w", priority=9)
    got = wb.claim()
    assert got is not None and got.workflow_exec_id == alone
    # Waiting 20 minutes, priority 9 is worth a fresh 5 plus a minute: it goes first.
    aged = wb.start_workflow("w", priority=9)
    clock.advance(21 * 60)
    wb.start_workflow("w")
    got = wb.claim()
    assert got is not None and got.workflow_exec_id == aged


def test_a_claims_aging_counts_the_wait_not_the_runs_age(wb: Whimbrel,
                                                        clock: StepClock) -> None:
    """Before: an attempt readied an hour into its run was served as if it had waited
    the whole hour (its run's creation), ahead of fresh urgent work."""
    wb.register_workflow(chain("slow", PULL))
    wb.register_workflow(pulled("hot", priority=0))
    slow = wb.start_workflow("slow")
    clock.advance(3600)
    up = wb.claim(workflow_name="slow", activity_name="up")
    assert up is not None
    wb.transition_activity(up.activity_exec_id, Transition.COMPLETED)
    readied_at = clock.now
    clock.advance(1)
    hot = wb.start_workflow("hot")
    got = [wb.claim(), wb.claim()]
    assert [c.workflow_exec_id if c else None for c in got] == [hot, slow]
    assert got[1] is not None
    claimed = wb.store.get_activity(got[1].activity_exec_id)
    assert claimed is not None and claimed.ready_epoch == readied_at  # its wait began


def test_a_pool_waiters_aging_counts_the_wait_not_the_runs_age(
        wb: Whimbrel, clock: StepClock, launched: RecordingLauncher) -> None:
    wb.set_pool("p", slots=1, per_second=None)
    wb.register_workflow(chain("slow", LAMBDA, pool="p"))
    wb.register_workflow(WorkflowDefinition("hot", (ActivityDefinition(
        "a", launcher=LAMBDA, pool="p", priority=0),)))
    wb.register_workflow(WorkflowDefinition("blocker", (ActivityDefinition(
        "a", launcher=LAMBDA, pool="p"),)))
    slow = wb.start_workflow("slow")
    clock.advance(3600)
    blocker = wb.start_workflow("blocker")
    up = wb.claim(workflow_name="slow")
    assert up is not None
    wb.transition_activity(up.activity_exec_id, Transition.COMPLETED)
    waiting = wb.get_workflow(slow).activity("a")
    assert (waiting.state, waiting.pool_wait) == (A.READY, "p")
    clock.advance(1)
    hot = wb.start_workflow("hot")
    assert wb.get_workflow(hot).activity("a").pool_wait == "p"
    launched.take()
    held = wb.get_workflow(blocker).activity("a").activity_exec_id
    wb.transition_activity(held, Transition.RUNNING)
    wb.transition_activity(held, Transition.COMPLETED)
    # The slot goes to the urgent newcomer: the other waited one second, not an hour.
    assert [r.workflow_exec_id for r in launched.take()] == [hot]
    assert wb.get_workflow(slow).activity("a").pool_wait == "p"
