"""Issue 31: a raw COMPLETED row whose dependent's ``when`` raises a plain TypeError at
run time is applied, and the dependent fails ``ConditionFailed`` — through the local
runtime's real streams and handlers (the row used to be retried, then dead-lettered,
with the dependent REQUESTED and the run RUNNING for good)."""

from __future__ import annotations

import pytest
from e2e_support import RawClient, event_row

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState as A
from whimbrel import WorkflowDefinition
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
