"""A code run's clean-up on cancel under crashes and double delivery (issue 26): a
clean-up decision crashed at each of its writes, redelivered, or made by two processes
at once schedules each clean-up step once, and the run ends CANCELLED
(engine/code_cancel.py)."""

from __future__ import annotations

import threading

import pytest
import wb_code_cancel as code
from code_crashes import crash_at_every_write, forget, start
from reliability_driver import peer

from whimbrel import ActivityState, Whimbrel, WorkflowState
from whimbrel.contract.records import WorkflowRecord
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.engine.engine import RECONCILE_GRACE_SECONDS
from whimbrel.testing import Crash, StepClock, wait_until

A = ActivityState
W = WorkflowState
#: Every step of the run, each with one attempt: two before the cancel, three after.
EXPECTED = [("a#1", "COMPLETED"), ("a#2", "CANCELLED"), ("undo#1", "COMPLETED"),
            ("undo#2", "COMPLETED"), ("undo#3", "COMPLETED")]


def _step(wb: Whimbrel, act_id: str, state: ActivityState, input: str | None) -> None:
    """A worker (``a``) or the pushed clean-up step's code (``undo``) reports."""
    if state in (A.READY, A.QUEUED):
        wb.transition_activity(act_id, "RUNNING")
    wb.transition_activity(act_id, "COMPLETED", output=code_json(input))


def code_json(text: str | None) -> object:
    import json
    return None if text is None else json.loads(text)


def _cancel(wb: Whimbrel, wx: str) -> None:
    """The caller cancels; one that crashed before its first write landed cancels again
    (after it, the run is CANCEL_REQUESTED: the sweep's visits finish the settle)."""
    while wb.engine.reads.workflow(wx).state is W.RUNNING:
        try:
            wb.cancel_workflow(wx)
        except Crash:
            forget(wb)


def _drive(wb: Whimbrel, clock: StepClock, wx: str) -> WorkflowRecord:
    """``a#1`` completes, the run is cancelled while it waits for ``a#2``, and each
    clean-up step the code asks for is completed; the sweep's reconcile visits repair
    what a crash left. Returns the run once it ended."""
    for _ in range(80):
        wf = wb.engine.reads.workflow(wx)
        if wf.state.is_terminal:
            return wf
        acts = {a.activity_name: a for a in wb.store.list_activities(wx)}
        try:
            a2 = acts.get("a#2")
            if wf.state is W.RUNNING and a2 is not None and a2.state is A.READY:
                _cancel(wb, wx)
                continue
            going = [a for a in acts.values()
                     if a.state in (A.READY, A.QUEUED, A.RUNNING)
                     and (a.activity_name == "a#1" or a.activity_name.startswith("undo#"))]
            for act in going:
                _step(wb, act.activity_exec_id, act.state, act.input)
            if not going:
                wb.sweep(clock.advance(RECONCILE_GRACE_SECONDS + 1))
        except Crash:
            forget(wb)
        except Exception:  # a move that lost to one made meanwhile: look again
            pass
    raise AssertionError(f"{wx} never ended: {wb.get_workflow(wx)}")


def _check(wb: Whimbrel, wx: str, why: str) -> None:
    run = wb.get_workflow(wx)
    assert run.state is W.CANCELLED, f"{why}: {run}"
    assert run.error is None, f"{why}: {run.error}"
    got = sorted((a.activity_name, a.attempt, a.state.value) for a in run.activities)
    assert got == [(n, 1, s) for n, s in EXPECTED], f"{why}: {got}"
    assert run.properties == {"undone": [0, 1]}, why


@pytest.mark.slow
def test_a_clean_up_decision_crashed_at_each_write_schedules_each_step_once(
        rwb: Whimbrel, step_clock: StepClock) -> None:
    rwb.register_workflow(code.cleanup_crashy)

    def run(request_id: str) -> str:
        wx = start(rwb, "cleanup_crashy", request_id)
        _drive(rwb, step_clock, wx)
        return wx
    crash_at_every_write(rwb, run, lambda wx, why: _check(rwb, wx, why))


def test_a_clean_up_decision_made_again_or_by_two_processes_schedules_nothing_twice(
        rwb: Whimbrel, step_clock: StepClock) -> None:
    other = peer(rwb, clock=step_clock)
    try:
        rwb.register_workflow(code.cleanup_crashy)
        other.register_workflow(code.cleanup_crashy)
        wx = rwb.start_workflow("cleanup_crashy")
        a1 = f"{wx}:a#1:1"
        _step(rwb, a1, A.READY, "1")
        wait_until(lambda: rwb.store.get_activity(f"{wx}:a#2:1") is not None, timeout=30)
        rwb.cancel_workflow(wx)
        errors: list[BaseException] = []

        def decide(wb: Whimbrel) -> None:
            try:
                runs = wb.engine.feature(CodeRuns)
                wf = wb.engine.reads.workflow(wx)
                if wf.state is W.CANCEL_REQUESTED:
                    runs.run_decision(wf, wb.engine.definitions.definition_of(wf),
                                      cold=True)
            except BaseException as exc:  # reported below
                errors.append(exc)

        for _ in range(4):  # the same decision, redelivered and raced, at every point
            for act in rwb.store.list_activities(wx):
                if act.activity_name.startswith("undo#") and act.state is A.QUEUED:
                    _step(rwb, act.activity_exec_id, act.state, act.input)
            threads = [threading.Thread(target=decide, args=(wb,))
                       for wb in (rwb, other, rwb, other)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert errors == []
        _drive(rwb, step_clock, wx)
        _check(rwb, wx, "decided again and at once")
    finally:
        other.close()
