"""Issue 29, listing that costs what it returns: a page of 50 runs by state alone, or
with no filter, takes at most 64 requests however many names are registered (here 100),
through the ``by_state`` index (one Query per state and shard) and ``by_day``."""

from __future__ import annotations

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    LauncherSpec,
    RetryPolicy,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.testing import StepClock

CLOCK = StepClock
W = WorkflowState
#: The issue's target: requests for one page of 50.
BUDGET = 64


def _requests(wb: Whimbrel) -> int:
    return sum(wb.meter.calls.values())


def test_a_page_by_state_alone_costs_the_same_with_100_names(
        wb: Whimbrel, clock: StepClock) -> None:
    for i in range(100):
        wb.register_workflow(WorkflowDefinition(f"cost_{i:03d}", (Act(
            "w", launcher=LauncherSpec.external(), retry=RetryPolicy(max_attempts=1)),)))
    started = []
    for i in range(120):
        clock.advance(1)
        started.append(wb.start_workflow(f"cost_{i % 100:03d}"))
    failed = set()
    for i in range(0, 120, 4):  # every fourth run FAILED
        got = wb.claim(workflow_name=f"cost_{i % 100:03d}")
        assert got is not None
        wb.transition_activity(got.activity_exec_id, Transition.FAILED, error="boom")
        failed.add(got.workflow_exec_id)
    wb.meter.reset()
    page = wb.list_workflows(state="RUNNING", limit=50)
    running = [wx for wx in reversed(started) if wx not in failed]
    assert [wf.workflow_exec_id for wf in page.items] == running[:50]
    assert page.cursor is not None
    assert _requests(wb) <= BUDGET, dict(wb.meter.calls)
    wb.meter.reset()
    rest = wb.list_workflows(state="RUNNING", limit=50, cursor=page.cursor)
    assert [wf.workflow_exec_id for wf in rest.items] == running[50:100]
    assert _requests(wb) <= BUDGET, dict(wb.meter.calls)
    wb.meter.reset()
    failures = wb.list_workflows(state=W.FAILED, limit=50)
    assert {wf.workflow_exec_id for wf in failures.items} == failed
    assert _requests(wb) <= BUDGET, dict(wb.meter.calls)
    wb.meter.reset()
    everything = wb.list_workflows(limit=50)
    assert [wf.workflow_exec_id for wf in everything.items] == list(reversed(started))[:50]
    assert _requests(wb) <= BUDGET, dict(wb.meter.calls)
