"""A code run's function kept running between decisions (engine/code_live.py): it decides
what a replay from the start decides, one wait at a time, and gives up cleanly."""

from __future__ import annotations

from typing import Any

from whimbrel import StepFailed, WorkflowContext
from whimbrel.contract.code import Decision, History, RunFacts, StepState, replay
from whimbrel.contract.states import ActivityState
from whimbrel.engine.code_live import LiveRun
from whimbrel.testing import wait_until

FACTS = RunFacts("wx-1", "w", {"n": 4}, 1000.0)
A = ActivityState
CLEANED: list[str] = []


def done(name: str, seq: int, output: str = "1") -> StepState:
    return StepState(name, seq, 1, A.COMPLETED, True, f"wx-1:{name}:1", output,
                     ended_epoch=1000.0 + seq)


def failed(name: str, seq: int) -> StepState:
    return StepState(name, seq, 1, A.FAILED, True, f"wx-1:{name}:1", error="no",
                     error_type="ValueError", ended_epoch=1000.0 + seq)


def loop(ctx: WorkflowContext, input: Any) -> Any:
    total = 0
    for i in range(input["n"]):
        try:
            total += ctx.step("add", i)
        except StepFailed:
            total -= 100
        if i == 1:
            ctx.properties["half"] = total
            handles = [ctx.start("side", k) for k in range(2)]
            total += sum(h.result() for h in handles)
    return {"total": total, "at": ctx.now().timestamp(), "id": str(ctx.uuid4())}


def _key(d: Decision) -> tuple[Any, ...]:
    return (d.outcome, [(s.name, s.seq, s.input) for s in d.new_steps], d.waiting_on,
            d.output, d.error, d.properties)


def test_each_advance_decides_what_a_replay_decides_past_the_last_wait() -> None:
    history = History()
    live = LiveRun(loop, FACTS, history, 0)
    asked: set[str] = set()
    plan = [("add#1", "1", False), ("add#2", "2", True), ("side#1", "5", False),
            ("side#2", "6", False), ("add#3", "3", False), ("add#4", "4", False)]
    for seq, (step, output, fail) in enumerate([(None, "", False), *plan]):
        if step is not None:
            history.put(failed(step, seq) if fail else done(step, seq, output))
        got = live.advance()
        assert got is not None
        whole = replay(loop, FACTS, history)
        assert (got.outcome, got.waiting_on, got.output, got.properties) == (
            whole.outcome, whole.waiting_on, whole.output, whole.properties)
        # A replay repeats what it asked for before; the live run tells only the new.
        assert [(s.name, s.input) for s in got.new_steps] == [
            (s.name, s.input) for s in whole.new_steps if s.name not in asked]
        asked.update(s.name for s in got.new_steps)
    assert got.outcome == "completed" and got.output is not None
    assert '"total":-81' in got.output  # 1, add#2 failed (-100), 5 + 6, 3, 4
    assert live.gone and live.advance() is None


def test_an_advance_with_nothing_new_decides_nothing() -> None:
    history = History()
    live = LiveRun(loop, FACTS, history, 0)
    first = live.advance()
    assert first is not None and [s.name for s in first.new_steps] == ["add#1"]
    again = live.advance()
    assert again is not None and _key(again) == ("waiting", [], ["add#1"], None, None, {})
    live.give_up()


def cleans_up(ctx: WorkflowContext, input: Any) -> Any:
    try:
        return ctx.step("work")
    finally:
        CLEANED.append("ran")
        ctx.step("undo")  # on a give-up (or a replay's stop) this schedules nothing


def test_giving_up_unwinds_the_function_and_schedules_nothing() -> None:
    CLEANED.clear()
    live = LiveRun(cleans_up, FACTS, History(), 0)
    d = live.advance()
    assert d is not None and [s.name for s in d.new_steps] == ["work#1"]
    live.give_up()
    wait_until(lambda: CLEANED, timeout=10)  # the function's own thread unwinds it
    assert CLEANED == ["ran"]
    assert live.gone and live.advance() is None
    # a replay's stop does the same: its finally schedules no undo
    d = replay(cleans_up, FACTS, History())
    assert [s.name for s in d.new_steps] == ["work#1"] and d.waiting_on == ["work#1"]


def test_an_idle_live_run_gives_up_its_thread() -> None:
    live = LiveRun(loop, FACTS, History(), 0, idle_seconds=0.05)
    assert live.advance() is not None
    wait_until(lambda: live.gone, timeout=10)
    assert live.gone and live.advance() is None


def test_a_replay_gone_wrong_ends_the_live_run() -> None:
    history = History()
    history.put(done("other#1", 1))  # the history holds another first step
    live = LiveRun(loop, FACTS, history, 0)
    d = live.advance()
    assert d is not None and d.outcome == "failed" and d.nondeterminism is not None
    assert live.gone and live.advance() is None
