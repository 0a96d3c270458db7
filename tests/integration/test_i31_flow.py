"""Issue 31, silently wrong answers of the flow: a child run ended early hands its parent
the early output; two simultaneous ``end_workflow`` calls have one winner; ``cancel`` of
an ended run and a reused request id with another input are refused clearly."""

from __future__ import annotations

import wb_flow_activities  # noqa: F401  (the activities below import it by name)

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    LauncherSpec,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.testing import assert_contract_holds

A, W = ActivityState, WorkflowState
py = LauncherSpec.python
M = "wb_flow_activities"

EARLY_CHILD = WorkflowDefinition("early_kid", (
    Act("ender", launcher=py(f"{M}:finish_now")),
    Act("more", ("ender",), launcher=py(f"{M}:echo")),
))
EARLY_PARENT = WorkflowDefinition("early_parent", (
    Act("spawn", launcher=LauncherSpec.workflow("early_kid")),
    Act("after", ("spawn",), launcher=py(f"{M}:echo")),
))
ANSWER = {"answer": 42, "from": "ender"}


def test_a_child_ended_early_hands_its_parent_the_early_output(wb: Whimbrel) -> None:
    wb.register_workflow(EARLY_CHILD)
    wb.register_workflow(EARLY_PARENT)
    wf = wb.wait(wb.start_workflow("early_parent", {}), timeout=30)
    assert wf.state is W.COMPLETED, wf
    [kid] = wf.child_workflow_exec_ids
    child = wb.get_workflow(kid)
    assert child.output == ANSWER and child.activity("more").state is A.SKIPPED
    assert wf.activity("spawn").output == ANSWER  # was {"more": None}
    assert wf.activity("after").output["upstream"] == {"spawn": ANSWER}
    assert_contract_holds(wf, EARLY_PARENT)
