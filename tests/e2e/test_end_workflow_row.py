"""Ending a run early through the Simple API (issue 22): an END_WORKFLOW row written with
a raw ``PutItem``, handled by the local runtime's real streams and handlers."""

from __future__ import annotations

import json

import pytest
from e2e_support import RawClient, event_row, rejection_about

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState as A
from whimbrel import WorkflowDefinition
from whimbrel import WorkflowState as W
from whimbrel.contract.ids import activity_exec_id
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import wait_until

pytestmark = pytest.mark.slow

EARLY = WorkflowDefinition("early_row", (
    Act("check"), Act("other"), Act("rest", ("check",)), Act("join", ("rest", "other"))))


def test_an_end_workflow_row_ends_the_run_with_its_output(runtime: LocalRuntime,
                                                          raw: RawClient) -> None:
    rt = runtime
    rt.client.register_workflow(EARLY)
    wx = rt.client.start_workflow("early_row")
    check = activity_exec_id(wx, "check", 1)
    other = activity_exec_id(wx, "other", 1)
    raw.row("RUNNING", activity_exec_id=other)
    raw.row("RUNNING", activity_exec_id=check)
    wait_until(lambda: rt.client.get_activity(check).state is A.RUNNING, timeout=15)
    wait_until(lambda: rt.client.get_activity(other).state is A.RUNNING, timeout=15)
    ended = raw.row("END_WORKFLOW", activity_exec_id=check,
                    output={"S": json.dumps({"verdict": "nothing to do"})})
    row = event_row(rt, ended)
    assert (row["outcome"]["S"], row["result_state"]["S"]) == ("APPLIED", "COMPLETED")
    wait_until(lambda: rt.client.get_activity(other).state is A.CANCELLED_RUNNING,
               timeout=15)
    wf = rt.client.get_workflow(wx)
    assert wf.state is W.COMPLETED and wf.output == {"verdict": "nothing to do"}
    states = {a.activity_name: a.state for a in wf.activities}
    assert states == {"check": A.COMPLETED, "other": A.CANCELLED_RUNNING,
                      "rest": A.SKIPPED, "join": A.SKIPPED}
    # The running one hears it on its next heartbeat row, as from a cancel.
    beat = raw.row("HEARTBEAT", activity_exec_id=other)
    assert event_row(rt, beat)["result_state"]["S"] == "CANCELLED_RUNNING"
    # Its own END_WORKFLOW now ends it CANCELLED, as a COMPLETED report would.
    late = raw.row("END_WORKFLOW", activity_exec_id=other, output={"S": "1"})
    assert event_row(rt, late)["result_state"]["S"] == "CANCELLED"
    # One on an attempt that ended is refused, and changes nothing.
    again = raw.row("END_WORKFLOW", activity_exec_id=check)
    assert "RUNNING" in rejection_about(rt, again).reason
    wf = rt.client.get_workflow(wx)
    assert wf.output == {"verdict": "nothing to do"} and wf.ended_by == check
