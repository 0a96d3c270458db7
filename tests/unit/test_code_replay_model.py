"""A Hypothesis model of code-workflow decisions (issue 26), pure: whatever order steps
end in, however often a decision is made again (redelivered, raced, after a crash that
lost what it kept in memory), each step is scheduled exactly once and the run's output is
the program's."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from whimbrel import WorkflowContext
from whimbrel.contract.code import History, RunFacts, StepState, replay
from whimbrel.contract.states import ActivityState

# A program: groups of steps; a group of one is ctx.step, larger ones run in parallel;
# ["m"] is a ctx.map (one step, whose output is a list).
programs = st.lists(st.one_of(
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3), st.just(["m"])),
    min_size=1, max_size=5)


def make(program: list[list[str]]) -> Any:
    def fn(ctx: WorkflowContext, input: Any) -> Any:
        out = []
        for group in program:
            if group == ["m"]:
                out.extend(ctx.map("m", [len(out)]))
                continue
            handles = [ctx.start(name, len(out)) for name in group]
            out.extend(h.result() for h in handles)
        return out
    return fn


@settings(max_examples=150, deadline=None)
@given(program=programs, data=st.data())
def test_each_step_is_scheduled_once_whatever_the_order_and_the_redeliveries(
        program: list[list[str]], data: st.DataObject) -> None:
    fn = make(program)
    facts = RunFacts("wx", "model", None, 0.0)
    table: dict[str, StepState] = {}     # the rows (what every process can read)
    scheduled: list[str] = []            # every step a decision created (must not repeat)
    pending: list[str] = []
    clock = 0.0
    for _ in range(200):
        # A decision from the table (a cold one: memory lost) or redelivered: each sees
        # the same rows, and creates only what the rows do not hold (attribute_not_exists).
        for _ in range(data.draw(st.integers(1, 2), label="deliveries")):
            history = History()
            for state in table.values():
                history.put(state)
            decision = replay(fn, facts, history)
            assert decision.nondeterminism is None
            for step in decision.new_steps:
                if step.name not in table:  # the put that wins; a replay's loses
                    table[step.name] = StepState(step.name, step.seq, 1,
                                                 ActivityState.RUNNING, False,
                                                 f"wx:{step.name}:1")
                    scheduled.append(step.name)
                    pending.append(step.name)
        if decision.outcome == "completed":
            steps = sum(len(g) for g in program)
            assert json.loads(decision.output or "null") == [
                _output(program, seq) for seq in range(1, steps + 1)]
            break
        assert pending, "waiting with nothing running"
        done = pending.pop(data.draw(st.integers(0, len(pending) - 1), label="ends"))
        clock += 1
        row = table[done]
        value = _output(program, row.seq)
        table[done] = StepState(done, row.seq, 1, ActivityState.COMPLETED, True,
                                row.activity_exec_id,
                                json.dumps([value] if done.startswith("m#") else value),
                                ended_epoch=clock)
    else:
        raise AssertionError("the run never completed")
    assert len(scheduled) == len(set(scheduled)) == sum(len(g) for g in program)


def _output(program: list[list[str]], seq: int) -> int:
    """A step's output in the model: the number of steps before its group."""
    before = 0
    for group in program:
        if seq <= before + len(group):
            return before
        before += len(group)
    raise AssertionError(seq)
