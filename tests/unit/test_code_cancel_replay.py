"""The pure replay of a cancelled code run (issue 26, clean-up on cancel): where
``Cancelled`` is raised, what the clean-up schedules, how it ends — from a history,
without a table (contract/code/cancel.py)."""

from __future__ import annotations

from typing import Any

from whimbrel import Cancelled, LauncherSpec, StepFailed, WorkflowContext
from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.code import History, RunFacts, StepState, encode_step, replay
from whimbrel.contract.code.definition import decode_step, is_cleanup_step
from whimbrel.contract.states import ActivityState

A = ActivityState
CANCELLED = RunFacts("wx-1", "w", None, 1000.0, cancelled=True)
PUSHED = LauncherSpec("lambda", {"function": "f"})


def step(name: str, seq: int, state: ActivityState, output: str | None = None, *,
         final: bool = True, cleanup: bool = False) -> StepState:
    return StepState(name, seq, 1, state, final, f"wx-1:{name}:1", output,
                     ended_epoch=1000.0 + seq, cleanup=cleanup)


def history(*steps: StepState) -> History:
    h = History()
    for s in steps:
        h.put(s)
    return h


def waits_then_cleans(ctx: WorkflowContext, input: Any) -> Any:
    first = ctx.step("a", 1)
    try:
        return ctx.step("b", first)
    except Cancelled as exc:
        ctx.properties["cut"] = exc.step
        undone = ctx.step("undo", first, launcher=PUSHED)
        ctx.properties["undone"] = undone
        raise


def test_the_cut_wait_raises_cancelled_and_the_clean_up_step_is_scheduled() -> None:
    h = history(step("a#1", 1, A.COMPLETED, "5"), step("b#1", 2, A.CANCELLED))
    d = replay(waits_then_cleans, CANCELLED, h)
    assert d.outcome == "waiting"
    assert [(s.name, s.seq, s.cleanup) for s in d.new_steps] == [("undo#1", 3, True)]
    assert d.waiting_on == ["undo#1"]
    assert d.properties == {"cut": "b#1"}


def test_the_clean_up_steps_result_reaches_the_code_and_the_end_is_cancelled() -> None:
    h = history(step("a#1", 1, A.COMPLETED, "5"), step("b#1", 2, A.CANCELLED),
                step("undo#1", 3, A.COMPLETED, '"ok"', cleanup=True))
    d = replay(waits_then_cleans, CANCELLED, h)
    assert d.outcome == "cancelled" and d.new_steps == []
    assert d.properties == {"cut": "b#1", "undone": "ok"}


def test_a_step_completed_before_the_cancel_returns_and_the_next_wait_is_cut() -> None:
    # b#1 completed, but the cancel came before the decision that would go on: the
    # code gets b's output, and the step after it is never scheduled.
    def goes_on(ctx: WorkflowContext, input: Any) -> Any:
        b = ctx.step("b", None)
        try:
            ctx.step("c", b)
        finally:
            ctx.properties["b"] = b
    d = replay(goes_on, CANCELLED, history(step("b#1", 1, A.COMPLETED, "7")))
    assert d.outcome == "cancelled" and d.new_steps == []
    assert d.properties == {"b": 7}


def test_a_step_cancelled_long_before_keeps_the_step_failed_the_code_saw() -> None:
    # a#1 was cancelled on its own and the code went on past it (c#1 is recorded after
    # it): the replay gives it its StepFailed again; the cut is at c#1.
    seen: list[str] = []

    def past_a_cancelled_step(ctx: WorkflowContext, input: Any) -> Any:
        try:
            ctx.step("a", None)
        except StepFailed as exc:
            seen.append(exc.state)
        try:
            ctx.step("c", None)
        except Cancelled as exc:
            seen.append(f"cut at {exc.step}")
            raise
    h = history(step("a#1", 1, A.CANCELLED), step("c#1", 2, A.CANCELLED))
    assert replay(past_a_cancelled_step, CANCELLED, h).outcome == "cancelled"
    assert seen == ["CANCELLED", "cut at c#1"]


def test_clean_up_names_continue_from_the_history_and_parallel_steps_go_together() -> None:
    def parallel_undo(ctx: WorkflowContext, input: Any) -> Any:
        ctx.step("undo", 0, launcher=PUSHED)
        try:
            ctx.wait_signal("go")
        except Cancelled:
            handles = [ctx.start("undo", i, launcher=PUSHED) for i in (1, 2)]
            return [h.result() for h in handles]
    h = history(step("undo#1", 1, A.COMPLETED, "0"), step("signal-go#1", 2, A.CANCELLED))
    d = replay(parallel_undo, CANCELLED, h)
    assert [(s.name, s.seq) for s in d.new_steps] == [("undo#2", 3), ("undo#3", 4)]
    assert all(s.cleanup for s in d.new_steps)


def test_a_broad_except_exception_does_not_catch_cancelled() -> None:
    def broad(ctx: WorkflowContext, input: Any) -> Any:
        try:
            ctx.wait_signal("go")
        except Exception:
            ctx.step("never", launcher=PUSHED)
        return "went on"
    d = replay(broad, CANCELLED, history(step("signal-go#1", 1, A.CANCELLED)))
    assert d.outcome == "cancelled" and d.new_steps == []


def test_waits_in_clean_up_raise_cancelled_external_and_pooled_steps_are_refused(
) -> None:
    def sleeps(ctx: WorkflowContext, input: Any) -> Any:
        try:
            ctx.wait_signal("go")
        finally:
            ctx.sleep(5)
    d = replay(sleeps, CANCELLED, history(step("signal-go#1", 1, A.CANCELLED)))
    assert d.outcome == "cancelled" and d.new_steps == []

    def external(ctx: WorkflowContext, input: Any) -> Any:
        try:
            ctx.wait_signal("go")
        finally:
            ctx.step("undo")
    d = replay(external, CANCELLED, history(step("signal-go#1", 1, A.CANCELLED)))
    assert d.outcome == "failed" and "clean-up step undo#1 is external" in (d.error or "")

    def pooled(ctx: WorkflowContext, input: Any) -> Any:
        try:
            ctx.wait_signal("go")
        finally:
            ctx.step("undo", launcher=PUSHED, pool="p")
    d = replay(pooled, CANCELLED, history(step("signal-go#1", 1, A.CANCELLED)))
    assert d.outcome == "failed" and "clean-up step undo#1 is in pool 'p'" in (d.error or "")


def test_in_a_run_not_cancelled_nothing_changes_and_a_finally_that_raises_waits() -> None:
    def raising_finally(ctx: WorkflowContext, input: Any) -> Any:
        try:
            ctx.wait_signal("go")
        finally:
            raise RuntimeError("only on a real end")
    facts = RunFacts("wx-1", "w", None, 1000.0)
    d = replay(raising_finally, facts, History())
    assert d.outcome == "waiting" and [s.cleanup for s in d.new_steps] == [False]
    d = replay(raising_finally, facts, history(step("signal-go#1", 1, A.COMPLETED, "1")))
    assert (d.outcome, d.error) == ("failed", "RuntimeError: only on a real end")


def test_a_clean_up_step_is_marked_on_its_row() -> None:
    spec = ActivityDefinition("undo", launcher=PUSHED)
    text = encode_step(3, spec, (), cleanup=True)
    assert is_cleanup_step(text) and not is_cleanup_step(encode_step(3, spec))
    assert not is_cleanup_step(None)
    assert decode_step(text, "undo") == (3, spec)


def test_cancelled_is_not_an_exception_and_names_the_cut_wait() -> None:
    assert issubclass(Cancelled, BaseException) and not issubclass(Cancelled, Exception)
    assert str(Cancelled("b#1")) == "the run was cancelled while waiting for b#1"
    assert Cancelled().step is None
