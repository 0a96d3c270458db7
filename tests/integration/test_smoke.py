from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState, LauncherSpec, Whimbrel, WorkflowDefinition, WorkflowState

PY = LauncherSpec.python("wb_test_activities:echo")


def test_diamond_smoke(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("diamond", (
        Act("A", launcher=PY), Act("B", ("A",), launcher=PY), Act("C", ("A",), launcher=PY),
        Act("D", ("B", "C"), launcher=PY)))
    assert wb.register_workflow(defn) == 1
    wx = wb.start_workflow("diamond", {"x": 1})
    wf = wb.wait(wx, timeout=20)
    assert wf.state is WorkflowState.COMPLETED, wf
    assert all(a.state is ActivityState.COMPLETED for a in wf.activities)
    assert wf.activity("D").output == {"name": "D", "upstream": ["B", "C"]}
