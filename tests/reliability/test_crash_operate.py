"""Issue 29 under crashes: a fork, and a batch, die at every write of theirs; then either
the same call is made again (a fork with its request id, a batch with its id) or only
the sweep carries on. Every fork ends with each reused activity once, COMPLETED with the
source's output, and the rest started once; a batch acts on every run exactly once."""

from __future__ import annotations

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    LauncherSpec,
    RetryPolicy,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.engine.engine import RECONCILE_GRACE_SECONDS
from whimbrel.testing import Crash, FaultInjector, StepClock

A, W = ActivityState, WorkflowState
EXT = LauncherSpec.external()
ONCE = RetryPolicy(max_attempts=1)
ETL = WorkflowDefinition("crash_fork", (
    Act("extract", launcher=EXT, retry=ONCE),
    Act("audit", launcher=EXT, retry=ONCE),
    Act("transform", ("extract", "audit"), launcher=EXT, retry=ONCE),
    Act("load", ("transform",), launcher=EXT, retry=ONCE)))


def _failed_source(wb: Whimbrel) -> str:
    wx = wb.start_workflow("crash_fork")
    for name, verb in (("extract", Transition.COMPLETED), ("audit", Transition.COMPLETED),
                       ("transform", Transition.FAILED)):
        got = wb.claim(workflow_name="crash_fork", activity_name=name)
        assert got is not None and got.workflow_exec_id == wx
        wb.transition_activity(got.activity_exec_id, verb, output={"n": name}, error="x")
    assert wb.get_workflow(wx).state is W.FAILED
    return wx


def _fork_is_whole(wb: Whimbrel, src: str, new: str, why: str) -> None:
    wf = wb.get_workflow(new)
    assert wf.state is W.RUNNING and wf.forked_from == src, (why, wf)
    got = sorted((a.activity_name, a.attempt, a.state) for a in wf.activities)
    assert got == [("audit", 1, A.COMPLETED), ("extract", 1, A.COMPLETED),
                   ("load", 1, A.REQUESTED), ("transform", 1, A.READY)], (why, got)
    for name in ("extract", "audit"):
        act = wf.activity(name)
        assert act.reused_from == activity_exec_id(src, name, 1) and act.output == {"n": name}
    claimed = wb.claim(workflow_name="crash_fork")
    assert claimed is not None and claimed.activity_exec_id == activity_exec_id(
        new, "transform", 1), (why, claimed)
    assert wb.claim(workflow_name="crash_fork") is None, why  # nothing twice


@pytest.mark.parametrize("recovery", ["again", "sweep"])
def test_a_fork_that_dies_at_any_write_is_finished(rwb: Whimbrel, step_clock: StepClock,
                                                   recovery: str) -> None:
    rwb.register_workflow(ETL)
    counter = FaultInjector()
    rwb.store.write_hooks.append(counter)
    rwb.fork_workflow(_failed_source_without_hooks(rwb, counter), from_activity="transform",
                      request_id="count")
    rwb.store.write_hooks.remove(counter)
    writes = counter.count
    assert writes >= 6, counter.writes
    rwb.claim(workflow_name="crash_fork")  # the counting fork's transform: out of the way
    for k in range(1, writes + 1):
        for phase in ("before", "after"):
            src = _failed_source(rwb)
            rid = f"fork-{recovery}-{k}-{phase}"
            crash = FaultInjector(at=k, phase=phase)
            rwb.store.write_hooks.append(crash)
            with pytest.raises(Crash):
                rwb.fork_workflow(src, from_activity="transform", request_id=rid)
            rwb.store.write_hooks.remove(crash)
            new = workflow_exec_id_for(rid)
            why = f"crash {phase} write {k} {crash.fired}"
            if recovery == "again" or rwb.store.get_workflow(new) is None:
                assert rwb.fork_workflow(src, from_activity="transform", request_id=rid) \
                    == new
            else:
                step_clock.advance(RECONCILE_GRACE_SECONDS + 1)
                report = rwb.sweep()
                assert not report.errors, (why, report.errors)
            _fork_is_whole(rwb, src, new, why)


def _failed_source_without_hooks(wb: Whimbrel, hook: FaultInjector) -> str:
    wb.store.write_hooks.remove(hook)
    try:
        return _failed_source(wb)
    finally:
        wb.store.write_hooks.append(hook)


def test_a_batch_that_dies_at_any_write_acts_once_on_every_run(
        rwb: Whimbrel, step_clock: StepClock) -> None:
    rwb.register_workflow(WorkflowDefinition("crash_batch", (
        Act("w", launcher=EXT, retry=ONCE),)))
    for k in range(1, 13):
        name = f"crash_batch_{k}"
        rwb.register_workflow(WorkflowDefinition(name, (Act("w", launcher=EXT, retry=ONCE),)))
        ids = []
        for _ in range(3):
            wx = rwb.start_workflow(name)
            got = rwb.claim(workflow_name=name)
            assert got is not None
            rwb.transition_activity(got.activity_exec_id, Transition.FAILED, error="x")
            ids.append(wx)
        crash = FaultInjector(at=k, phase="after" if k % 2 else "before")
        rwb.store.write_hooks.append(crash)
        try:
            rwb.batch("redrive", name=name, batch_id=f"b{k}")
        except Crash:
            pass
        finally:
            rwb.store.write_hooks.remove(crash)
        report = rwb.batch("redrive", name=name, batch_id=f"b{k}")
        for wx in ids:
            wf = rwb.get_workflow(wx)
            assert (wf.state, wf.redrive_count) == (W.RUNNING, 1), (k, wf)
            tags = [h for h in wf.history if h.by == f"batch:b{k}"]
            assert len(tags) == 1, (k, wf.history)
        assert len(report.done) + len(report.skipped) == 3 and not report.refused, report
