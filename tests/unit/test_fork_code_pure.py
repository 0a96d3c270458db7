"""Issue 29, the fork of a code run from a step, without a table: which steps a fork from
``name#k`` keeps (the ones at an earlier position that COMPLETED), how the step is named,
what an unknown step's error says, and that a fork's seed replays its source's values."""

from __future__ import annotations

import pytest

from whimbrel import InvalidInput, WorkflowContext
from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.code import History, RunFacts, encode_step
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.engine.fork_code import kept_steps, seeded, step_named

A = ActivityState
SOURCE = WorkflowRecord("src", "w", 1, WorkflowState.FAILED, created_epoch=100.0)


def row(name: str, seq: int, state: ActivityState, attempt: int = 1) -> ActivityRecord:
    return ActivityRecord("src", f"src:{name}:{attempt}", name, "w", attempt, state,
                          step=encode_step(seq, ActivityDefinition(name.split("#")[0])))


#: reserve#1, then charge#1 and audit#1 started together (audit in flight), charge#1
#: failed once and completed on its retry, then charge#2 (failed), then notify#1.
ROWS = [row("reserve#1", 1, A.COMPLETED), row("charge#1", 2, A.FAILED),
        row("charge#1", 2, A.COMPLETED, attempt=2), row("audit#1", 3, A.RUNNING),
        row("charge#2", 4, A.FAILED), row("notify#1", 5, A.COMPLETED)]


@pytest.mark.parametrize(("given", "named"), [
    ("charge#2", "charge#2"), ("charge", "charge#1"), ("charge#02", "charge#2"),
    ("a#b#3", "a#b#3")])
def test_a_step_is_name_and_call(given: str, named: str) -> None:
    assert step_named(given) == named


@pytest.mark.parametrize("bad", ["charge#0", "charge#", "#2", "charge#x", "charge#²"])
def test_a_bad_call_number_is_refused(bad: str) -> None:
    with pytest.raises(InvalidInput, match="is not a step <name>#<k>"):
        step_named(bad)


def test_the_completed_steps_at_earlier_positions_are_kept() -> None:
    kept = kept_steps(SOURCE, ROWS, "charge#2")
    # audit#1 was in flight: it runs again; charge#1's kept attempt is its latest.
    assert {n: r.attempt for n, r in kept.items()} == {"reserve#1": 1, "charge#1": 2}
    assert list(kept_steps(SOURCE, ROWS, "reserve")) == []
    assert set(kept_steps(SOURCE, ROWS, "notify#1")) == {"reserve#1", "charge#1"}


def test_an_unknown_step_names_those_the_run_has() -> None:
    with pytest.raises(InvalidInput, match=r"run src has no step 'refund#1'; its steps, "
                       r"in order: reserve#1, charge#1, audit#1, charge#2, notify#1$"):
        kept_steps(SOURCE, ROWS, "refund#1")
    with pytest.raises(InvalidInput, match=r"never reached step 'charge#3': its code "
                       r"called 'charge' 2 time\(s\) \(charge#1, charge#2\)$"):
        kept_steps(SOURCE, ROWS, "charge#3")
    many = [row(f"s{k}#1", k, A.COMPLETED) for k in range(1, 12)]
    with pytest.raises(InvalidInput, match=r"s8#1, \.\.\. \(11 in all\)$"):
        kept_steps(SOURCE, many, "x#1")


def test_a_fork_replays_its_sources_seed_and_start() -> None:
    assert seeded(SOURCE) == {"code_seed": "src", "code_epoch": 100.0}
    fork = WorkflowRecord("fork", "w", 1, WorkflowState.RUNNING, created_epoch=500.0,
                          forked_from="src", **seeded(SOURCE))
    assert seeded(fork) == {"code_seed": "src", "code_epoch": 100.0}  # a fork of a fork

    def values(facts: RunFacts) -> tuple[object, ...]:
        ctx = WorkflowContext(facts, History())
        return ctx.now(), ctx.uuid4(), ctx.random(), ctx.uuid4()

    assert values(RunFacts("fork", "w", None, 100.0, seed="src")) == values(
        RunFacts("src", "w", None, 100.0))
    assert values(RunFacts("fork", "w", None, 100.0))[1] != values(
        RunFacts("src", "w", None, 100.0))[1]
