"""Issue 20, child workflows: outputs kept whole, redrive through the parent, cycles and
nesting depth refused, the child's id on the attempt (decisions 2, 3, 8 and 12).

Written to fail on the main of the day the issue was filed; each test names the finding.
"""

from __future__ import annotations

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    InvalidDefinition,
    LauncherSpec,
    Whimbrel,
    WhimbrelError,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.ids import activity_exec_id
from whimbrel.testing import wait_until

A, W = ActivityState, WorkflowState
EXT = LauncherSpec.external()
child = LauncherSpec.workflow

#: What a map item reports: 50 KB of text (under the per-attempt output limit).
FIFTY_KB = "x" * 50_000


def _child_of(wb: Whimbrel, aeid: str) -> str:
    """The child run the attempt ``aeid`` started, as the run view lists it (waited for)."""
    wx = aeid.rsplit(":", 2)[0]
    name = aeid.rsplit(":", 2)[1]

    def seen() -> str | None:
        return wb.get_workflow(wx).activity(name).child_workflow_exec_id
    return wait_until(seen, timeout=30, message=f"{aeid} started no child")


def _run_external(wb: Whimbrel, aeid: str, verb: str = "COMPLETED", **kw: object) -> None:
    wb.transition_activity(aeid, "RUNNING")
    wb.transition_activity(aeid, verb, **kw)  # type: ignore[arg-type]


# -- decision 2: a child's large output is never replaced by null --------------------------

def test_a_childs_large_map_output_reaches_the_parent_whole_or_fails_the_attempt(
        wb: Whimbrel) -> None:
    """Finding: the child's last activity, a map of 2 x 50 KB items, reached the parent as
    ``null``; the parent COMPLETED with ``{"m": null}``."""
    wb.register_workflow(WorkflowDefinition("i20_big", (
        Act("m", launcher=EXT, map_over="$input.xs"),)))
    wb.register_workflow(WorkflowDefinition("i20_big_parent", (
        Act("sub", launcher=child("i20_big"), input={"xs": [0, 1]}),)))
    wx = wb.start_workflow("i20_big_parent")
    sub = activity_exec_id(wx, "sub", 1)
    kid = _child_of(wb, sub)
    for i in (0, 1):
        item = activity_exec_id(kid, f"m#{i}", 1)
        wait_until(lambda item=item: wb.store.get_activity(item), timeout=30,  # type: ignore[misc]
                   message=f"map item {item} never created")
        _run_external(wb, item, output=FIFTY_KB)
    parent = wb.wait(wx, timeout=30)
    got = parent.activity("sub")
    child_run = wb.get_workflow(kid)
    if got.state is A.COMPLETED:
        # The whole output, or nothing at all: never a null in place of data.
        assert child_run.state is W.COMPLETED and child_run.output is not None
        assert got.output is not None and got.output == child_run.output, (
            f"parent's attempt COMPLETED with {str(got.output)[:200]!r}")
        assert got.output.get("m") is not None, "the map's output became null in the parent"
        assert parent.state is W.COMPLETED
    else:
        assert got.state is A.FAILED, got
        assert "output too large" in (got.error or ""), got.error
        assert parent.state is W.FAILED


# -- decision 3: a child run is redriven through its parent, in place --------------------

def _failed_parent_with_failed_child(wb: Whimbrel) -> tuple[str, str]:
    wb.register_workflow(WorkflowDefinition("i20_kid", (
        Act("first", launcher=EXT), Act("second", ("first",), launcher=EXT))))
    wb.register_workflow(WorkflowDefinition("i20_mom", (
        Act("sub", launcher=child("i20_kid")),)))
    wx = wb.start_workflow("i20_mom")
    kid = _child_of(wb, activity_exec_id(wx, "sub", 1))
    _run_external(wb, activity_exec_id(kid, "first", 1), output={"done": 1})
    wait_until(lambda: wb.store.get_activity(activity_exec_id(kid, "second", 1)), timeout=30)
    _run_external(wb, activity_exec_id(kid, "second", 1), "FAILED", error="disk full")
    assert wb.wait(kid, timeout=30).state is W.FAILED
    assert wb.wait(wx, timeout=30).state is W.FAILED
    return wx, kid


def test_redriving_a_child_run_directly_is_refused_naming_the_parent(wb: Whimbrel) -> None:
    """Finding: redriving the FAILED child completed it, but the parent stayed FAILED."""
    wx, kid = _failed_parent_with_failed_child(wb)
    with pytest.raises(WhimbrelError) as refused:
        wb.redrive_workflow(kid)
    assert "redrive the parent" in str(refused.value)
    assert wx in str(refused.value)
    assert wb.get_workflow(kid).state is W.FAILED
    assert wb.get_workflow(wx).state is W.FAILED


def test_redriving_the_parent_redrives_its_failed_child_in_place(wb: Whimbrel) -> None:
    """Finding: redriving the parent started a second child run; its work ran twice."""
    wx, kid = _failed_parent_with_failed_child(wb)
    wb.redrive_workflow(wx)
    # The same child run goes on: its failed activity gets a new attempt.
    again = activity_exec_id(kid, "second", 2)
    wait_until(lambda: wb.store.get_activity(again), timeout=15,
               message="the child's failed activity got no new attempt")
    assert wb.count_workflows(name="i20_kid") == 1
    parent = wb.get_workflow(wx)
    latest_sub = max((a for a in parent.activities if a.activity_name == "sub"),
                     key=lambda a: a.attempt)
    assert latest_sub.child_workflow_exec_id == kid
    _run_external(wb, again, output={"second": 2})
    assert wb.wait(kid, timeout=30).state is W.COMPLETED
    assert wb.wait(wx, timeout=30).state is W.COMPLETED
    child_run = wb.get_workflow(kid)
    firsts = [a for a in child_run.activities if a.activity_name == "first"]
    assert len(firsts) == 1 and firsts[0].state is A.COMPLETED, firsts
    assert wb.count_workflows(name="i20_kid") == 1


# -- decision 8: cycles refused at registration, a nesting-depth limit --------------------

def test_a_workflow_that_is_its_own_child_is_refused(wb: Whimbrel) -> None:
    """Finding: registered; a start nested ~95 runs deep until RecursionError."""
    with pytest.raises(InvalidDefinition) as refused:
        wb.register_workflow(WorkflowDefinition("A", (Act("sub", launcher=child("A")),)))
    assert "A → A" in str(refused.value)
    assert wb.list_definitions("A") == []


def test_a_two_workflow_cycle_is_refused_naming_it(wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("A", (Act("sub", launcher=child("B")),)))
    with pytest.raises(InvalidDefinition) as refused:
        wb.register_workflow(WorkflowDefinition("B", (Act("sub", launcher=child("A")),)))
    assert "A → B → A" in str(refused.value)
    assert wb.list_definitions("B") == []


def _chain(wb: Whimbrel, prefix: str, levels: int) -> list[str]:
    """``levels`` distinct definitions, each starting the next as a child; the last one
    waits on an external activity. Registered leaf first (no cycle anywhere)."""
    names = [f"{prefix}{i}" for i in range(levels)]
    wb.register_workflow(WorkflowDefinition(names[-1], (Act("leaf", launcher=EXT),)))
    for here, below in zip(reversed(names[:-1]), reversed(names[1:]), strict=True):
        wb.register_workflow(WorkflowDefinition(here, (Act("sub", launcher=child(below)),)))
    return names


def _descend(wb: Whimbrel, top: str) -> list[str]:
    """The run ids from ``top`` down the ``sub`` children, as far as they exist now."""
    out = [top]
    while True:
        wf = wb.get_workflow(out[-1])
        subs = [a for a in wf.activities if a.activity_name == "sub"]
        kid = subs[-1].child_workflow_exec_id if subs else None
        if kid is None:
            return out
        out.append(kid)


def test_nesting_deeper_than_the_limit_is_refused_with_a_clear_error(wb: Whimbrel) -> None:
    """A limit of 10 nested runs: a chain of 12 distinct definitions may not start whole."""
    names = _chain(wb, "deep", 12)
    top = wb.start_workflow(names[0])

    def settled() -> bool:
        ended = wb.get_workflow(top).state.is_terminal
        return ended or wb.count_workflows(name=names[-1]) > 0
    wait_until(settled, timeout=60, message="the top run neither failed nor nested 12 deep")
    assert wb.count_workflows(name=names[-1]) == 0, "the leaf beyond the limit started"
    assert wb.wait(top, timeout=30).state is W.FAILED
    runs = _descend(wb, top)
    assert len(runs) <= 11, f"{len(runs)} runs nested"
    deepest = wb.get_workflow(runs[-1]).activity("sub")
    assert deepest.state is A.FAILED
    assert "depth" in (deepest.error or "") and "10" in (deepest.error or ""), deepest.error


def test_cancelling_a_deep_tree_does_not_recurse_out_of_the_stack(wb: Whimbrel) -> None:
    """Finding: cancel_workflow(top) raised RecursionError on a deep tree."""
    names = _chain(wb, "tree", 10)
    top = wb.start_workflow(names[0])
    leaf_runs = wait_until(lambda: wb.list_workflows(name=names[-1]).items, timeout=60,
                           message="the tree never reached depth 10")
    runs = _descend(wb, top)
    assert len(runs) == 10 and runs[-1] == leaf_runs[0].workflow_exec_id
    wb.cancel_workflow(top)  # must not raise RecursionError
    for wx in runs:
        assert wb.wait(wx, timeout=30).state is W.CANCELLED, wx


# -- decision 12: the attempt shows the child it started ----------------------------------

def test_get_activity_names_the_child_of_a_running_attempt(wb: Whimbrel) -> None:
    """Finding: get_activity(id).child_workflow_exec_id was None while get_workflow()
    listed it."""
    wb.register_workflow(WorkflowDefinition("i20_waiter", (Act("hold", launcher=EXT),)))
    wb.register_workflow(WorkflowDefinition("i20_boss", (
        Act("sub", launcher=child("i20_waiter")),)))
    wx = wb.start_workflow("i20_boss")
    aeid = activity_exec_id(wx, "sub", 1)
    kid = _child_of(wb, aeid)
    got = wb.get_activity(aeid)
    assert got.state is A.RUNNING
    assert got.child_workflow_exec_id == kid


def test_a_parent_redrive_that_crashed_at_any_write_redrives_the_same_child(
        wb: Whimbrel, clock: object) -> None:
    """Every crash point of the parent's redrive (the parent's move, the new attempt, its
    RUNNING write, the child's redrive...): the reconciler finishes it, and the child is
    the same run, redriven in place; no second child is ever started."""
    from whimbrel.contract.dataflow import child_request_id
    from whimbrel.contract.ids import workflow_exec_id_for
    from whimbrel.testing import Crash, FaultInjector

    at = 0
    while True:
        at += 1
        wx, kid = _failed_parent_with_failed_child(wb)
        crash = FaultInjector(at=at, phase="after")
        wb.store.write_hooks.append(crash)
        try:
            wb.redrive_workflow(wx)
        except Crash:
            pass
        finally:
            wb.store.write_hooks.remove(crash)
        again = activity_exec_id(kid, "second", 2)
        for _ in range(6):  # the reconciler repairs what the crash left
            row = wb.store.get_activity(again)
            if row is not None and row.state is A.READY:
                break
            clock.advance(200)  # type: ignore[attr-defined]
            wb.sweep()
        assert wb.get_activity(again).state is A.READY, f"crash at {crash.fired}"
        sub2 = activity_exec_id(wx, "sub", 2)
        assert wb.get_activity(sub2).child_workflow_exec_id == kid, crash.fired
        assert wb.store.get_workflow(workflow_exec_id_for(child_request_id(sub2))) is None
        _run_external(wb, again, output={"second": 2})
        assert wb.wait(wx, timeout=30).state is W.COMPLETED, crash.fired
        firsts = [a for a in wb.get_workflow(kid).activities if a.activity_name == "first"]
        assert len(firsts) == 1, crash.fired
        if crash.fired is None:
            break  # every write of the redrive was a crash point once
    assert at > 4
    assert wb.count_workflows(name="i20_kid") == at
