"""A Hypothesis model of a code run's clean-up on cancel (issue 26), pure: the run is
cancelled after any number of its steps ended; whatever order the clean-up's steps end
in and however often a clean-up decision is made again (redelivered, raced, cold), the
cut lands at the same wait, no step of the cut-off path is scheduled, each clean-up step
is scheduled once, and the clean-up ends (contract/code/cancel.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from whimbrel import Cancelled, LauncherSpec, WorkflowContext
from whimbrel.contract.code import History, RunFacts, StepState, replay
from whimbrel.contract.states import ActivityState

A = ActivityState
PUSHED = LauncherSpec("lambda", {"function": "f"})
names = st.sampled_from(["a", "b", "c"])
# Groups of steps; a group of one is ctx.step, larger ones run in parallel.
groups = st.lists(st.lists(names, min_size=1, max_size=3), min_size=1, max_size=4)


def make(program: list[list[str]], cleanup: list[list[str]]) -> Any:
    def fn(ctx: WorkflowContext, input: Any) -> Any:
        out = []
        try:
            for group in program:
                handles = [ctx.start(name, len(out)) for name in group]
                out.extend(h.result() for h in handles)
        except Cancelled as exc:
            ctx.properties["cut"] = exc.step
            for group in cleanup:
                handles = [ctx.start(name, -1, launcher=PUSHED) for name in group]
                [h.result() for h in handles]
            raise
        return out
    return fn


def _history(table: dict[str, StepState]) -> History:
    history = History()
    for state in table.values():
        history.put(state)
    return history


@settings(max_examples=150, deadline=None)
@given(program=groups, cleanup=groups, data=st.data())
def test_a_clean_up_schedules_each_step_once_and_ends_whatever_the_order(
        program: list[list[str]], cleanup: list[list[str]], data: st.DataObject) -> None:
    fn = make(program, cleanup)
    table: dict[str, StepState] = {}
    pending: list[str] = []
    ends = data.draw(st.integers(0, sum(len(g) for g in program) - 1), label="ends")
    # Before the cancel: decisions, and `ends` steps ending in any order.
    for _ in range(ends + 1):
        decision = replay(fn, RunFacts("wx", "m", None, 0.0), _history(table))
        for step in decision.new_steps:
            if step.name not in table:
                table[step.name] = StepState(step.name, step.seq, 1, A.RUNNING, False,
                                             f"wx:{step.name}:1")
                pending.append(step.name)
        if decision.outcome != "waiting" or len(table) - len(pending) == ends:
            break
        done = pending.pop(data.draw(st.integers(0, len(pending) - 1), label="end"))
        row = table[done]
        table[done] = StepState(done, row.seq, 1, A.COMPLETED, True,
                                row.activity_exec_id, "0")
    if decision.outcome != "waiting":
        event("completed before the cancel")
        return
    # The cancel stops every step still going.
    for name in pending:
        row = table[name]
        table[name] = StepState(name, row.seq, 1, A.CANCELLED, True, row.activity_exec_id)
    before = set(table)
    cancelled = RunFacts("wx", "m", None, 0.0, cancelled=True)
    going: list[str] = []
    cuts: set[Any] = set()
    for _ in range(100):
        for _ in range(data.draw(st.integers(1, 2), label="deliveries")):
            decision = replay(fn, cancelled, _history(table))
            cuts.add(decision.properties.get("cut"))
            for step in decision.new_steps:
                assert step.cleanup, f"{step.name} of the cut-off path was scheduled"
                if step.name not in table:
                    table[step.name] = StepState(step.name, step.seq, 1, A.RUNNING, False,
                                                 f"wx:{step.name}:1", cleanup=True)
                    going.append(step.name)
        if decision.outcome != "waiting":
            break
        assert going, "waiting with nothing running"
        done = going.pop(data.draw(st.integers(0, len(going) - 1), label="cleaned"))
        row = table[done]
        table[done] = StepState(done, row.seq, 1, A.COMPLETED, True, row.activity_exec_id,
                                "0", cleanup=True)
    else:
        raise AssertionError("the clean-up never ended")
    assert decision.outcome == "cancelled", decision
    assert len(cuts) == 1 and None not in cuts  # the same wait, every replay
    added = [n for n in table if n not in before]
    assert len(added) == sum(len(g) for g in cleanup)
    assert all(table[n].cleanup for n in added)
    event("cleaned up")
