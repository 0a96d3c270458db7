"""Issue 31 on the Simple API: raw rows through the local runtime's real streams and
handlers.

* A COMPLETED row whose dependent's ``when`` raises a plain TypeError at run time is
  applied, and the dependent fails ``ConditionFailed`` (the row used to be retried,
  then dead-lettered, with the dependent REQUESTED and the run RUNNING for good).
* An END_WORKFLOW row in a child run hands the parent's attempt the early output (it
  used to get the child's sinks' outputs, ``{"more": null}``).
"""

from __future__ import annotations

import json

import pytest
from e2e_support import RawClient, activity_state, event_row

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState as A
from whimbrel import LauncherSpec, WorkflowDefinition
from whimbrel import WorkflowState as W
from whimbrel.contract.ids import activity_exec_id
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import wait_until

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
