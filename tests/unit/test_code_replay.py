"""The pure replay of code workflows (issue 26): what a decision decides from a history,
without a table."""

from __future__ import annotations

from typing import Any

import pytest

from whimbrel import InvalidDefinition, NonDeterminism, StepFailed, WorkflowContext
from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.code import (
    CodeDefinition,
    History,
    RunFacts,
    StepState,
    decode_step,
    encode_step,
    replay,
    workflow,
)
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.launching import LauncherSpec, RetryPolicy
from whimbrel.contract.states import ActivityState

FACTS = RunFacts("wx-1", "w", {"x": 1}, 1000.0)
A = ActivityState


def done(name: str, seq: int, output: str = "1", patches: tuple[str, ...] = ()) -> StepState:
    return StepState(name, seq, 1, A.COMPLETED, True, f"wx-1:{name}:1", output,
                     ended_epoch=1000.0 + seq, patches=patches)


def two_steps(ctx: WorkflowContext, input: Any) -> Any:
    a = ctx.step("a", input)
    try:
        b = ctx.step("b", a)
    except Exception:  # a user's broad except must not swallow the replay's stop
        return "swallowed"
    return [a, b]


def test_the_first_decision_schedules_the_first_step_and_waits() -> None:
    d = replay(two_steps, FACTS, History())
    assert d.outcome == "waiting"
    assert [(s.name, s.seq, s.input) for s in d.new_steps] == [("a#1", 1, '{"x":1}')]
    assert d.waiting_on == ["a#1"]


def test_a_recorded_step_returns_its_output_and_the_next_is_scheduled() -> None:
    history = History()
    history.put(done("a#1", 1, "5"))
    d = replay(two_steps, FACTS, history)
    assert d.outcome == "waiting" and [s.name for s in d.new_steps] == ["b#1"]
    history.put(done("b#1", 2, "6"))
    d = replay(two_steps, FACTS, history)
    assert (d.outcome, d.output) == ("completed", "[5,6]")


def test_another_step_than_the_history_holds_is_non_determinism() -> None:
    history = History()
    history.put(done("x#1", 1))
    d = replay(two_steps, FACTS, history)
    assert d.outcome == "failed" and d.new_steps == []
    assert isinstance(d.nondeterminism, NonDeterminism)
    assert (d.nondeterminism.expected, d.nondeterminism.actual) == ("x#1", "a#1")


def test_a_failed_step_raises_step_failed_with_its_fields() -> None:
    history = History()
    history.put(StepState("a#1", 1, 2, A.FAILED, True, "wx-1:a#1:2", None, "boom",
                          "ValueError"))

    def catch(ctx: WorkflowContext, input: Any) -> Any:
        try:
            ctx.step("a")
        except StepFailed as exc:
            return [exc.state, exc.error, exc.error_type, exc.activity_exec_id]
        return None

    d = replay(catch, FACTS, history)
    assert d.output == '["FAILED","boom","ValueError","wx-1:a#1:2"]'


def test_now_uuid_and_random_repeat_and_properties_are_kept() -> None:
    def values(ctx: WorkflowContext, input: Any) -> Any:
        ctx.properties["k"] = "v"
        return [ctx.now().timestamp(), str(ctx.uuid4()), ctx.random()]

    first, again = replay(values, FACTS, History()), replay(values, FACTS, History())
    assert first.output == again.output and first.properties == {"k": "v"}


def test_properties_that_are_not_json_fail_the_run() -> None:
    def bad(ctx: WorkflowContext, input: Any) -> Any:
        ctx.properties["when"] = object()
        return 1

    d = replay(bad, FACTS, History())
    assert d.outcome == "failed" and "ctx.properties is not JSON" in (d.error or "")


def test_patched_is_recorded_on_the_next_step_and_read_back() -> None:
    def patched(ctx: WorkflowContext, input: Any) -> Any:
        return ctx.step("new") if ctx.patched("p1") else ctx.step("old")

    d = replay(patched, FACTS, History())
    assert [(s.name, s.patches) for s in d.new_steps] == [("new#1", ("p1",))]
    old_run = History()
    old_run.put(done("old#1", 1))  # passed the point before the patch
    assert replay(patched, FACTS, old_run).outcome == "completed"


def test_a_step_spec_round_trips_compactly() -> None:
    act = ActivityDefinition("charge", launcher=LauncherSpec.python("m:f"),
                             retry=RetryPolicy(max_attempts=3), start_to_close_seconds=30)
    text = encode_step(4, act, ("p",))
    assert len(text) < 130  # only what differs from a plain activity
    assert decode_step(text, "charge") == (4, act)


def test_workflow_options_are_validated() -> None:
    with pytest.raises(InvalidDefinition, match="priority"):
        workflow("w", priority=12)(two_steps)
    defn = workflow("w", max_running=2)(two_steps).definition()
    assert WorkflowDefinition.from_json(defn.to_json()) == defn
    assert isinstance(WorkflowDefinition.from_json(defn.to_json()), CodeDefinition)
