"""Issue 29, the fork of a code run under crashes: ``fork_workflow(..., from_activity="a#2")``
dies at every write of its own and of the first decision it makes (before the write
landed, or after); then the same call is made again (same request id) or only the sweep
carries on. Every fork ends with the kept steps once each, reused with the source's
output, the fork point's step scheduled once, and the run completing as its source did."""

from __future__ import annotations

import pytest
import wb_code_workflows as code

from whimbrel import ActivityState, Whimbrel, WorkflowState
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.engine.code_decide import Histories
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.engine.engine import RECONCILE_GRACE_SECONDS
from whimbrel.testing import Crash, FaultInjector, StepClock

A, W = ActivityState, WorkflowState
KEPT = ["a#1", "p#1", "p#2"]  # before a#2 in the code's order of calls, all COMPLETED


def _complete_ready(wb: Whimbrel, wx: str) -> int:
    """Each READY external step completed with its input as its output; how many."""
    ready = [a for a in wb.store.list_activities(wx) if a.state is A.READY]
    for act in ready:
        wb.transition_activity(act.activity_exec_id, "RUNNING")
        wb.transition_activity(act.activity_exec_id, "COMPLETED",
                               output=code.json_loads(act.input))
    return len(ready)


def _source(wb: Whimbrel) -> str:
    wx = wb.start_workflow("crashy")
    for _ in range(10):
        if not _complete_ready(wb, wx):
            break
    run = wb.get_workflow(wx)
    assert run.state is W.COMPLETED and run.output == [1, [0, 1], 2], run
    return wx


def _die(wb: Whimbrel) -> None:
    """The process died: what it kept in memory is gone."""
    wb.engine.feature(CodeRuns).histories = Histories()


def _fork_is_whole(wb: Whimbrel, src: str, new: str, why: str) -> None:
    wf = wb.get_workflow(new)
    assert wf.state is W.RUNNING and wf.forked_from == src, (why, wf)
    got = sorted((a.activity_name, a.attempt, a.state) for a in wf.activities)
    assert got == sorted([*[(n, 1, A.COMPLETED) for n in KEPT], ("a#2", 1, A.READY)]), \
        (why, got)
    for name in KEPT:
        assert wf.activity(name).reused_from == activity_exec_id(src, name, 1), why
    assert _complete_ready(wb, new) == 1, why
    done = wb.get_workflow(new)
    assert done.state is W.COMPLETED and done.output == [1, [0, 1], 2], (why, done)
    assert done.properties == {"outs": [0, 1]}, why


@pytest.mark.parametrize("recovery", ["again", "sweep"])
def test_a_code_fork_that_dies_at_any_write_is_finished(
        rwb: Whimbrel, step_clock: StepClock, recovery: str) -> None:
    rwb.register_workflow(code.crashy)
    src = _source(rwb)
    counter = FaultInjector()
    rwb.store.write_hooks.append(counter)
    counted = rwb.fork_workflow(src, from_activity="a#2", request_id=f"count-{src}")
    rwb.store.write_hooks.remove(counter)
    writes = counter.count
    assert writes >= 6, counter.writes  # request, 3 kept steps, the run, its decision
    _fork_is_whole(rwb, src, counted, "no crash")
    for k in range(1, writes + 1):
        for phase in ("before", "after"):
            src = _source(rwb)
            rid = f"fork-code-{recovery}-{k}-{phase}-{src}"
            crash = FaultInjector(at=k, phase=phase)
            rwb.store.write_hooks.append(crash)
            try:
                rwb.fork_workflow(src, from_activity="a#2", request_id=rid)
            except Crash:
                pass
            finally:
                rwb.store.write_hooks.remove(crash)
            _die(rwb)
            why = f"crash {phase} write {k} {crash.fired}"
            assert crash.fired is not None, why
            new = workflow_exec_id_for(rid)
            if recovery == "again" or rwb.store.get_workflow(new) is None:
                assert rwb.fork_workflow(src, from_activity="a#2", request_id=rid) == new
            else:
                report = rwb.sweep(step_clock.advance(RECONCILE_GRACE_SECONDS + 1))
                assert not report.errors, (why, report.errors)
            _fork_is_whole(rwb, src, new, why)
