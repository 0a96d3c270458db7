"""A child-run launcher and its child in one pool, or in one ``max_running`` definition
(issue 31), on DynamoDB Local: registration refuses what it can see; what only the run
shows fails at once instead of waiting for good."""

from __future__ import annotations

import pytest

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    InvalidDefinition,
    LauncherSpec,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)

A, W = ActivityState, WorkflowState
PULL = LauncherSpec.external()


def leaf(name: str, pool: str | None = None, **kw: int) -> WorkflowDefinition:
    return WorkflowDefinition(name, (ActivityDefinition("work", launcher=PULL, pool=pool),),
                              **kw)  # type: ignore[arg-type]


def parent(name: str, child: str, pool: str | None = None, version: int | None = None,
           **kw: int) -> WorkflowDefinition:
    return WorkflowDefinition(name, (ActivityDefinition(
        "sub", launcher=LauncherSpec.workflow(child, version=version), pool=pool),),
        **kw)  # type: ignore[arg-type]


def test_registration_refuses_a_launcher_whose_child_needs_its_pool(wb: Whimbrel) -> None:
    """Before: accepted, and the first run waited for good (the launcher held the only
    slot its child's activity waited for)."""
    wb.set_pool("api", slots=1, per_second=None)
    wb.register_workflow(leaf("child", pool="api"))
    with pytest.raises(InvalidDefinition, match="deadlock") as refused:
        wb.register_workflow(parent("boss", "child", pool="api"))
    assert "activity 'work' of 'child' waits for one" in str(refused.value)
    # Deeper: the grandchild needs it.
    wb.register_workflow(parent("middle", "child"))
    with pytest.raises(InvalidDefinition, match="pool 'api'"):
        wb.register_workflow(parent("top", "middle", pool="api"))
    # Another pool, or a rate alone (its tokens come back), is fine.
    wb.set_pool("other", slots=1, per_second=None)
    wb.register_workflow(parent("fine", "child", pool="other"))
    wb.set_pool("paced", slots=None, per_second=5)
    wb.register_workflow(leaf("paced_child", pool="paced"))
    wb.register_workflow(parent("paced_boss", "paced_child", pool="paced"))


def test_registration_refuses_a_max_running_run_that_starts_its_own_name(
        wb: Whimbrel) -> None:
    wb.register_workflow(leaf("job", max_running=1))
    with pytest.raises(InvalidDefinition, match="max_running=1 run slots its parent holds"):
        wb.register_workflow(parent("job", "job", version=1, max_running=1))
    wb.register_workflow(parent("job", "job", version=1))  # no max_running: fine


def test_a_nesting_only_the_run_shows_fails_instead_of_waiting(wb: Whimbrel) -> None:
    """The child definition took the pool after its parent was registered: the child's
    attempt fails at once (PoolDeadlock), its run fails, the parent's attempt fails with
    it and gives the slot back. Before: RUNNING for good, holding the only slot."""
    wb.set_pool("api", slots=1, per_second=None)
    wb.register_workflow(leaf("child"))
    wb.register_workflow(parent("boss", "child", pool="api"))
    wb.register_workflow(leaf("child", pool="api"))  # version 2: registration cannot see
    wf = wb.wait(wb.start_workflow("boss"), timeout=30)
    assert wf.state is W.FAILED
    sub = wf.activity("sub")
    assert sub.state is A.FAILED and sub.error_type == "ChildWorkflowFailed"
    child_wx = sub.child_workflow_exec_id
    assert child_wx is not None
    work = wb.get_workflow(child_wx).activity("work")
    assert (work.state, work.error_type) == (A.FAILED, "PoolDeadlock")
    assert "pool 'api'" in (work.error or "")
    assert wb.get_pool("api").in_use == 0


def test_a_max_running_child_only_the_run_shows_is_refused_not_queued(wb: Whimbrel) -> None:
    """job (max_running 1) starts mid, whose later version starts job version 1: no
    registration saw both. The inner start would wait QUEUED for the run slot its
    ancestor holds; it is refused instead, and the runs fail rather than wait for good."""
    wb.register_workflow(leaf("job", max_running=1))
    wb.register_workflow(leaf("mid"))
    wb.register_workflow(parent("job", "mid", max_running=1))  # version 2
    wb.register_workflow(parent("mid", "job", version=1))  # version 2: no cycle by version
    wf = wb.wait(wb.start_workflow("job"), timeout=30)
    assert wf.state is W.FAILED
    mid_wx = wf.activity("sub").child_workflow_exec_id
    assert mid_wx is not None
    inner = wb.get_workflow(mid_wx).activity("sub")
    assert (inner.state, inner.error_type) == (A.FAILED, "PoolDeadlock")
    assert "max_running=1" in (inner.error or "")
    # The run slot was given back: a new run of job starts at once (never QUEUED).
    again = wb.get_workflow(wb.start_workflow("job"))
    assert "QUEUED" not in [h.state for h in again.history]
