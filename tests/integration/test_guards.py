"""The contract's guards hold for callers outside the engine (issue 11, part 1).

Each test is a sequence a new user could type into the Full Logic API; on the engine
before these guards every one of them changed the tables (the workflow even ended
COMPLETED with an activity still READY).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState as A
from whimbrel import IllegalTransition, Whimbrel, WorkflowDefinition, WorkflowState
from whimbrel.contract.errors import ListenerOnly, UpstreamNotCompleted, WorkflowNotRunning
from whimbrel.contract.ids import activity_exec_id
from whimbrel.testing import StepClock

ETL = WorkflowDefinition("etl", (Act("extract"), Act("transform", ("extract",)),
                                 Act("load", ("transform",))))
FAN_IN = WorkflowDefinition("fanin", (Act("a"), Act("b"), Act("join", ("a", "b"))))


@pytest.fixture
def wb(ddb_endpoint: str, table_prefix: str) -> Iterator[Whimbrel]:
    client = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix, clock=StepClock())
    client.create_tables()
    for defn in (ETL, FAN_IN):
        client.register_workflow(defn)
    yield client
    client.close()
    client.store.delete_tables()


def states(wb: Whimbrel, wx: str) -> dict[str, str]:
    return {a.activity_exec_id: a.state.value for a in wb.get_workflow(wx).activities}


@pytest.mark.parametrize("verb", ["READY", "QUEUED"])
def test_ready_or_queued_before_the_upstreams_completed_is_refused(wb: Whimbrel,
                                                                   verb: str) -> None:
    wx = wb.start_workflow("etl")
    load = activity_exec_id(wx, "load", 1)
    before = states(wb, wx)
    with pytest.raises(UpstreamNotCompleted) as info:
        wb.transition_activity(load, verb)
    assert "transform (REQUESTED)" in str(info.value)
    assert info.value.open_upstreams == ["transform (REQUESTED)"]
    assert states(wb, wx) == before
    # The sequence that used to end the run COMPLETED with extract still READY:
    assert wb.claim(workflow_name="etl", activity_name="load") is None
    assert wb.get_workflow(wx).state is WorkflowState.RUNNING


def test_fan_in_names_every_open_upstream(wb: Whimbrel) -> None:
    wx = wb.start_workflow("fanin")
    a = wb.claim(workflow_name="fanin", activity_name="a")
    assert a is not None
    wb.transition_activity(a.activity_exec_id, "COMPLETED")
    with pytest.raises(UpstreamNotCompleted) as info:
        wb.transition_activity(activity_exec_id(wx, "join", 1), "READY")
    assert info.value.open_upstreams == ["b (READY)"]
    b = wb.claim(workflow_name="fanin", activity_name="b")
    assert b is not None
    wb.transition_activity(b.activity_exec_id, "COMPLETED")
    # Now the engine made it READY itself; asking again is a lost race, not a guard.
    assert wb.get_activity(activity_exec_id(wx, "join", 1)).state is A.READY


def test_a_ready_the_engine_would_make_anyway_is_fine(wb: Whimbrel) -> None:
    wx = wb.start_workflow("etl")
    extract = wb.claim(workflow_name="etl", activity_name="extract")
    assert extract is not None
    # Completed by a writer that died before its follow-ups (a raw move, no readying):
    wb.store.move_activity(extract.activity_exec_id, A.RUNNING, (A.COMPLETED,), {},
                           now=wb.clock(), actor="died")
    transform = activity_exec_id(wx, "transform", 1)
    assert wb.transition_activity(transform, "READY").state is A.READY


def test_nothing_starts_in_a_workflow_that_is_not_running(wb: Whimbrel) -> None:
    wx = wb.start_workflow("fanin")
    a_id, b_id = activity_exec_id(wx, "a", 1), activity_exec_id(wx, "b", 1)
    # The moment between a cancel's write and its clean-up: the workflow says
    # CANCEL_REQUESTED while a and b are still READY (and claimable).
    wb.store.move_workflow(wx, [WorkflowState.RUNNING], WorkflowState.CANCEL_REQUESTED, {},
                           now=wb.clock(), actor="test", workflow_name="fanin")
    for verb in ("RUNNING", "PREPARING", "QUEUED"):
        with pytest.raises(WorkflowNotRunning, match="CANCEL_REQUESTED"):
            wb.transition_activity(a_id, verb)
    assert wb.get_activity(a_id).state is A.READY
    # A claim finds them in the index, but hands out nothing: what it took it gives up.
    assert wb.claim(workflow_name="fanin") is None
    assert wb.claim(workflow_name="fanin") is None
    wf = wb.get_workflow(wx)
    assert wf.state is WorkflowState.CANCELLED
    assert {wf.activity("a").state, wf.activity("b").state} == {A.CANCELLED}
    assert wb.get_activity(b_id).ended_epoch is not None


def test_completion_is_checked_on_the_tables(wb: Whimbrel) -> None:
    wx = wb.start_workflow("etl")
    load = activity_exec_id(wx, "load", 1)
    # What the unguarded engine let happen: the sink COMPLETED while extract is READY.
    wb.store.move_activity(load, A.REQUESTED, (A.READY, A.RUNNING, A.COMPLETED), {},
                           now=wb.clock(), actor="rogue")
    wb.engine.moves.ensure_followups(load)
    assert wb.get_workflow(wx).state is WorkflowState.RUNNING
    assert wb.sweep(wb.clock.advance(600)).reconciled == []  # and never by the reconciler
    assert wb.get_workflow(wx).state is WorkflowState.RUNNING


def test_time_out_is_the_listeners_move_only(wb: Whimbrel) -> None:
    wx = wb.start_workflow("etl")
    extract = wb.claim(workflow_name="etl")
    assert extract is not None
    for target in (extract.activity_exec_id, activity_exec_id(wx, "load", 1)):
        with pytest.raises(ListenerOnly, match="only by the heartbeat listener"):
            wb.transition_activity(target, "TIME_OUT")
    assert wb.get_activity(extract.activity_exec_id).state is A.RUNNING
    assert isinstance(ListenerOnly(current="RUNNING"), IllegalTransition)


def test_claim_skips_a_finished_workflows_leftovers(wb: Whimbrel) -> None:
    wx = wb.start_workflow("fanin")
    wb.cancel_workflow(wx)
    assert wb.get_workflow(wx).state is WorkflowState.CANCELLED
    assert wb.claim(workflow_name="fanin") is None
