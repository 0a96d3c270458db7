"""Issue 31 on the Simple API: raw rows through the local runtime's real streams and
handlers.

* A COMPLETED row whose dependent's ``when`` raises a plain TypeError at run time is
  applied, and the dependent fails ``ConditionFailed`` (the row used to be retried,
  then dead-lettered, with the dependent REQUESTED and the run RUNNING for good).
* An END_WORKFLOW row in a child run hands the parent's attempt the early output (it
  used to get the child's sinks' outputs, ``{"more": null}``).
* A result row is judged by its stream record's creation time against the deadline,
  not by when the engine applies it.
"""

from __future__ import annotations

import json
import time

import pytest
from e2e_support import RawClient, activity_state, event_row

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState as A
from whimbrel import LauncherSpec, WorkflowDefinition
from whimbrel import WorkflowState as W
from whimbrel.contract.ids import activity_exec_id
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import StepClock, wait_until

pytestmark = pytest.mark.slow

GATED = WorkflowDefinition("gated_row", (
    Act("a"), Act("b", ("a",), when="input.x > `1`"), Act("c", ("a",))))


def test_a_completed_row_whose_dependents_when_raises_is_applied(runtime: LocalRuntime,
                                                                 raw: RawClient) -> None:
    rt = runtime
    rt.client.register_workflow(GATED)
    wx = rt.client.start_workflow("gated_row", {"x": "a"})
    a = activity_exec_id(wx, "a", 1)
    assert event_row(rt, raw.row("RUNNING", activity_exec_id=a))["outcome"]["S"] == "APPLIED"
    done = event_row(rt, raw.row("COMPLETED", activity_exec_id=a, output={"S": "{}"}))
    assert (done["outcome"]["S"], done["result_state"]["S"]) == ("APPLIED", "COMPLETED")
    b = wait_until(lambda: (got := rt.client.get_activity(activity_exec_id(wx, "b", 1)))
                   .state is A.FAILED and got, timeout=15)
    assert b.error_type == "ConditionFailed" and "TypeError" in (b.error or "")
    wf = wait_until(lambda: (got := rt.client.get_workflow(wx)).state.is_terminal and got,
                    timeout=15)
    assert wf.state is W.FAILED
    assert wf.activity("c").state is A.CANCELLED  # READY, never launched: the run's end
    assert [r for r in rt.client.list_rejections() if r.source == "dead_letter"] == []


KID = WorkflowDefinition("kid_row", (Act("check"), Act("more", ("check",))))
PARENT = WorkflowDefinition("parent_row", (
    Act("spawn", launcher=LauncherSpec.workflow("kid_row")), Act("next", ("spawn",))))


def test_an_end_workflow_row_in_a_child_hands_the_parent_its_output(runtime: LocalRuntime,
                                                                     raw: RawClient) -> None:
    rt = runtime
    rt.client.register_workflow(KID)
    rt.client.register_workflow(PARENT)
    wx = rt.client.start_workflow("parent_row")
    spawn = activity_exec_id(wx, "spawn", 1)
    kid = wait_until(lambda: rt.client.get_activity(spawn).child_workflow_exec_id,
                     timeout=15)
    check = activity_exec_id(kid, "check", 1)
    wait_until(lambda: activity_state(rt, check) == "READY", timeout=15)
    raw.row("RUNNING", activity_exec_id=check)
    wait_until(lambda: activity_state(rt, check) == "RUNNING", timeout=15)
    ended = raw.row("END_WORKFLOW", activity_exec_id=check,
                    output={"S": json.dumps({"verdict": "early"})})
    assert event_row(rt, ended)["result_state"]["S"] == "COMPLETED"
    got = wait_until(lambda: (a := rt.client.get_activity(spawn)).state.is_terminal and a,
                     timeout=15)
    assert got.state is A.COMPLETED and got.output == {"verdict": "early"}, got
    assert rt.client.get_workflow(kid).activity("more").state is A.SKIPPED


ON_TIME = WorkflowDefinition("on_time_row", (Act("late", start_to_close_seconds=60),
                                             Act("in_time", start_to_close_seconds=60)))


def test_a_row_is_judged_by_its_stream_records_creation_time(ddb_endpoint: str,
                                                              table_prefix: str,
                                                              raw: RawClient) -> None:
    """The engine's clock is a StepClock; the rows' times are DynamoDB's own
    (``ApproximateCreationDateTime`` on the local runtime's stream events). No sweep runs:
    what decides is the row's time against the deadline, not when it is applied."""
    # A stream record's time may be rounded down by up to a minute (DynamoDB Local's
    # were, one run in three): the deadlines lie well clear of it on both sides.
    clock = StepClock(start=time.time() - 200)
    with LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0, clock=clock,
                      lambda_log_level="WARNING", exclusive=False) as rt:
        rt.client.register_workflow(ON_TIME)
        wx = rt.client.start_workflow("on_time_row")
        late = rt.client.claim(workflow_name="on_time_row", activity_name="late")
        assert late is not None  # its deadline: 140 s before the rows are written
        clock.advance(180)
        in_time = rt.client.claim(workflow_name="on_time_row", activity_name="in_time")
        assert in_time is not None  # its deadline: about 40 s after the rows are written
        clock.advance(200)  # the engine's now is past both deadlines and their grace
        done = event_row(rt, raw.event(in_time.activity_exec_id, "COMPLETED", output=1))
        assert (done["outcome"]["S"], done["result_state"]["S"]) == ("APPLIED", "COMPLETED")
        kept = event_row(rt, raw.event(late.activity_exec_id, "COMPLETED", output=2))
        assert (kept["outcome"]["S"], kept["result_state"]["S"]) == \
            ("LATE_OUTPUT", "TIMED_OUT")
        got = rt.client.get_activity(late.activity_exec_id)
        assert got.state is A.TIMED_OUT and got.late_output == 2
        assert "past its start_to_close_seconds (60 s)" in (got.error or "")
        assert rt.client.get_workflow(wx).activity("in_time").output == 1
        rt.client.store.delete_tables()
