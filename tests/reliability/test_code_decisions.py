"""Code workflows' decisions under crashes and double delivery (issue 26).

A decision crashed at each of its writes (before it landed, or after), then the world
going on (the reconcile visit's cold decision, the steps' own ends), schedules each step
exactly once and the run ends as without a crash; a decision made again (a redelivered
follow-up) or by two processes at once schedules nothing twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import wb_code_workflows as code
from code_crashes import crash_at_every_write, forget, start
from reliability_driver import peer

from whimbrel import ActivityState, Whimbrel, WorkflowState
from whimbrel.contract.records import WorkflowRecord
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.engine.engine import RECONCILE_GRACE_SECONDS
from whimbrel.testing import Crash, StepClock

A = ActivityState
W = WorkflowState
EXPECTED_STEPS = ["a#1", "a#2", "p#1", "p#2"]


def _drive(wb: Whimbrel, clock: StepClock, wx: str) -> WorkflowRecord:
    """Complete each READY external step (output: its input), crash or not; the sweep's
    reconcile visits repair what a crash left. Returns the run once it ended."""
    for _ in range(60):
        wf = wb.engine.reads.workflow(wx)
        if wf.state.is_terminal:
            return wf
        # READY: a worker claims it; RUNNING: its worker (or one after a crash) reports.
        # (A map's own row is no worker's: the engine runs it, its items end it.)
        ready = [a for a in wb.store.list_activities(wx)
                 if a.state in (A.READY, A.RUNNING) and a.map_size is None]
        try:
            for act in ready:
                if act.state is A.READY:
                    wb.transition_activity(act.activity_exec_id, "RUNNING")
                wb.transition_activity(act.activity_exec_id, "COMPLETED",
                                       output=code.json_loads(act.input))
        except Crash:
            forget(wb)
        except Exception:  # a move that lost to one made meanwhile: look again
            pass
        if not ready:
            try:
                wb.sweep(clock.advance(RECONCILE_GRACE_SECONDS + 1))
            except Crash:
                forget(wb)
    raise AssertionError(f"{wx} never ended: {wb.get_workflow(wx)}")


def _check(wb: Whimbrel, wx: str, why: str) -> None:
    run = wb.get_workflow(wx)
    assert run.state is W.COMPLETED, f"{why}: {run}"
    assert run.output == [1, [0, 1], 2], why
    attempts = sorted((a.activity_name, a.attempt) for a in run.activities)
    assert attempts == [(n, 1) for n in EXPECTED_STEPS], f"{why}: {attempts}"
    assert run.properties == {"outs": [0, 1]}, why


def _check_map(wb: Whimbrel, wx: str, why: str) -> None:
    run = wb.get_workflow(wx)
    assert run.state is W.COMPLETED, f"{why}: {run}"
    assert run.output == [[0, 1, 2], 9], why
    attempts = sorted((a.activity_name, a.attempt) for a in run.activities)
    assert attempts == [("a#1", 1), ("m#1", 1)], f"{why}: {attempts}"
    items = sorted((a.activity_name, a.attempt) for a in run.items)
    assert items == [(f"m#1#{i}", 1) for i in range(3)], f"{why}: {items}"
    node = run.activity("m#1")
    assert [c.state for c in node.history].count("RUNNING") == 1, f"{why}: {node}"


def _run(wb: Whimbrel, clock: StepClock, name: str) -> Callable[[str], str]:
    def run(request_id: str) -> str:
        wx = start(wb, name, request_id)
        _drive(wb, clock, wx)
        return wx
    return run


@pytest.mark.slow
def test_a_decision_crashed_at_each_write_schedules_each_step_once(
        rwb: Whimbrel, step_clock: StepClock) -> None:
    rwb.register_workflow(code.crashy)
    crash_at_every_write(rwb, _run(rwb, step_clock, "crashy"),
                         lambda wx, why: _check(rwb, wx, why))


@pytest.mark.slow
def test_a_map_crashed_at_each_write_runs_each_item_once(
        rwb: Whimbrel, step_clock: StepClock) -> None:
    # ctx.map: the decision that schedules the map step, the map's expansion, its items'
    # chain and its end, each cut at every write; the reconcile visit repairs the map.
    rwb.register_workflow(code.crashy_map)
    crash_at_every_write(rwb, _run(rwb, step_clock, "crashy_map"),
                         lambda wx, why: _check_map(rwb, wx, why), before_every=1)


@pytest.mark.parametrize("name", ["crashy", "crashy_map"])
def test_a_decision_made_again_or_by_two_processes_at_once_schedules_nothing_twice(
        rwb: Whimbrel, step_clock: StepClock, name: str) -> None:
    other = peer(rwb, clock=step_clock)
    wf_code = getattr(code, name)
    try:
        rwb.register_workflow(wf_code)
        other.register_workflow(wf_code)
        wx = rwb.start_workflow(name)
        errors: list[BaseException] = []

        def decide(wb: Whimbrel) -> None:
            try:
                runs = wb.engine.feature(CodeRuns)
                wf = wb.engine.reads.workflow(wx)
                runs.run_decision(wf, wb.engine.definitions.definition_of(wf), cold=True)
            except BaseException as exc:  # reported below
                errors.append(exc)

        for _ in range(4):  # the same decision, redelivered and raced, at every point
            for act in rwb.store.list_activities(wx):
                if act.state is A.READY:
                    rwb.transition_activity(act.activity_exec_id, "RUNNING")
                    rwb.transition_activity(act.activity_exec_id, "COMPLETED",
                                            output=code.json_loads(act.input))
            threads = [threading.Thread(target=decide, args=(wb,))
                       for wb in (rwb, other, rwb, other)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert errors == []
        _drive(rwb, step_clock, wx)
        (_check if name == "crashy" else _check_map)(rwb, wx, "decided again and at once")
    finally:
        other.close()
