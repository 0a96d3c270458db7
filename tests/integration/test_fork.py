"""Issue 29, fork: ``fork_workflow`` starts a new run of a run's definition that keeps the
completed outputs of what does not depend on the chosen activity (recorded as reused,
never run) and runs that activity and everything after it again — on DynamoDB Local.
The clock stands still (``CLOCK = StepClock``)."""

from __future__ import annotations

from typing import Any

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    DefinitionNotFound,
    InvalidInput,
    LauncherSpec,
    RetryPolicy,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowNotFound,
    WorkflowState,
)
from whimbrel.contract.ids import activity_exec_id
from whimbrel.testing import StepClock

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

CLOCK = StepClock
A, W = ActivityState, WorkflowState
EXT = LauncherSpec.external()
ONCE = RetryPolicy(max_attempts=1)


def _etl(*extra: Act) -> WorkflowDefinition:
    """extract -> transform -> load, and audit beside them (a root of its own)."""
    return WorkflowDefinition("fork_etl", (
        Act("extract", launcher=EXT, retry=ONCE),
        Act("audit", launcher=EXT, retry=ONCE),
        Act("transform", ("extract",), launcher=EXT, retry=ONCE),
        Act("load", ("transform",), launcher=EXT, retry=ONCE), *extra))


def _finish(wb: Whimbrel, wx: str, name: str, verb: Transition = Transition.COMPLETED,
            output: Any = None) -> None:
    got = wb.claim(workflow_name="fork_etl", activity_name=name)
    assert got is not None and got.workflow_exec_id == wx, (name, got)
    wb.transition_activity(got.activity_exec_id, verb, output=output, error="bad code")


def _failed_run(wb: Whimbrel) -> str:
    wx = wb.start_workflow("fork_etl", {"day": "2026-11-26"})
    _finish(wb, wx, "extract", output={"rows": 3})
    _finish(wb, wx, "audit", output={"ok": True})
    _finish(wb, wx, "transform", Transition.FAILED)
    assert wb.get_workflow(wx).state is W.FAILED
    return wx


def test_a_fork_reuses_what_came_before_and_runs_the_rest(wb: Whimbrel) -> None:
    wb.register_workflow(_etl())
    src = _failed_run(wb)
    new = wb.fork_workflow(src, from_activity="transform")
    wf = wb.get_workflow(new)
    assert (wf.state, wf.forked_from, wf.redrive_count, wf.version) == (
        W.RUNNING, src, 0, 1)
    assert wf.input == {"day": "2026-11-26"}
    latest = wf.latest_activities
    assert latest["extract"].reused_from == activity_exec_id(src, "extract", 1)
    assert latest["audit"].reused_from == activity_exec_id(src, "audit", 1)
    assert (latest["extract"].state, latest["extract"].output) == (A.COMPLETED, {"rows": 3})
    assert latest["transform"].state is A.READY and latest["transform"].reused_from is None
    assert latest["load"].state is A.REQUESTED
    # Nothing reused is claimable; transform reads extract's reused output.
    got = wb.claim(workflow_name="fork_etl")
    assert got is not None and got.activity_exec_id == activity_exec_id(new, "transform", 1)
    with wb.run_activity(got.activity_exec_id) as run:
        assert run.upstream == {"extract": {"rows": 3}}
        run.output = {"clean": 3}
    _finish(wb, new, "load", output={"loaded": 3})
    done = wb.get_workflow(new)
    assert done.state is W.COMPLETED
    assert done.output == {"extract": {"rows": 3}, "audit": {"ok": True},
                           "transform": {"clean": 3}, "load": {"loaded": 3}}
    assert wb.get_workflow(src).state is W.FAILED  # the source is left as it was


def test_a_fork_from_a_root_a_new_input_a_version_and_a_fork_of_a_fork(
        wb: Whimbrel) -> None:
    wb.register_workflow(_etl())
    src = _failed_run(wb)
    new = wb.fork_workflow(src, from_activity="extract", input={"day": "2026-11-27"})
    wf = wb.get_workflow(new)
    assert wf.input == {"day": "2026-11-27"}
    assert {n for n, a in wf.latest_activities.items() if a.reused_from} == {"audit"}
    assert wf.activity("extract").state is A.READY
    assert wb.register_workflow(_etl(Act("notify", ("load",), launcher=EXT))) == 2
    v2 = wb.fork_workflow(new, from_activity="load", version=2)
    wf2 = wb.get_workflow(v2)
    assert (wf2.version, wf2.forked_from) == (2, new)
    # Only what the source completed is reused: here audit (itself reused).
    assert {n for n, a in wf2.latest_activities.items() if a.reused_from} == {"audit"}
    assert wf2.activity("audit").reused_from == activity_exec_id(new, "audit", 1)
    assert wf2.activity("extract").state is A.READY  # not completed in its source


def test_the_same_request_id_is_one_fork(wb: Whimbrel) -> None:
    wb.register_workflow(_etl())
    src = _failed_run(wb)
    one = wb.fork_workflow(src, from_activity="transform", request_id="fork-1")
    two = wb.fork_workflow(src, from_activity="transform", request_id="fork-1")
    assert one == two
    acts = wb.get_workflow(one).activities
    assert sorted((a.activity_name, a.attempt) for a in acts) == [
        ("audit", 1), ("extract", 1), ("load", 1), ("transform", 1)]
    other = wb.start_workflow("fork_etl", request_id="taken")
    with pytest.raises(InvalidInput, match="not a fork of"):
        wb.fork_workflow(src, from_activity="transform", request_id="taken")
    assert wb.get_workflow(other).forked_from is None


def test_bad_input_is_refused_and_nothing_is_written(wb: Whimbrel) -> None:
    wb.register_workflow(_etl())
    src = _failed_run(wb)
    before = wb.count_workflows(name="fork_etl")
    with pytest.raises(InvalidInput, match="has no activity 'trasnform'; its activities: "
                                           "extract, audit, transform, load"):
        wb.fork_workflow(src, from_activity="trasnform")
    with pytest.raises(WorkflowNotFound):
        wb.fork_workflow("no-such-run", from_activity="transform")
    with pytest.raises(DefinitionNotFound):
        wb.fork_workflow(src, from_activity="transform", version=9)
    with pytest.raises(InvalidInput, match="from_activity"):
        wb.fork_workflow(src, from_activity="")
    with pytest.raises(InvalidInput, match="input is not JSON"):
        wb.fork_workflow(src, from_activity="transform", input={"x": object()})
    assert wb.count_workflows(name="fork_etl") == before
