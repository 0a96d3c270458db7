"""Failure handlers (on_failure), continue, and non-retryable errors."""

from __future__ import annotations

import wb_data_activities  # noqa: F401  (the activities below import it by name)

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    LauncherSpec,
    RetryPolicy,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.ids import activity_exec_id
from whimbrel.testing import assert_contract_holds

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

A, W = ActivityState, WorkflowState
py = LauncherSpec.python


def test_handler_runs_with_the_error_and_stands_in_for_the_failure(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("checkout", (
        Act("charge", launcher=py("wb_data_activities:refuse"), on_failure="refund",
            retry=RetryPolicy(max_attempts=3, initial_interval_seconds=0,
                              non_retryable=("PermissionError",))),
        Act("refund", launcher=py("wb_data_activities:handler")),
        Act("notify", ("charge",), launcher=py("wb_data_activities:summary")),
    ))
    wb.register_workflow(defn)
    assert defn.roots == ("charge",) and defn.sinks == ("notify",)
    wf = wb.wait(wb.start_workflow("checkout", {"order": 7}), timeout=30)
    assert wf.state is W.COMPLETED, wf
    charge = wf.activity("charge")
    # non_retryable: the first failure is final, whatever max_attempts says.
    assert charge.state is A.FAILED and charge.attempt == 1
    assert charge.error_type == "PermissionError"
    refund = wf.activity("refund")
    assert refund.called_by == charge.activity_exec_id
    handled = {"handled": "charge", "error_type": "PermissionError", "refunded": True}
    assert refund.output == handled
    assert wf.activity("notify").output["upstream"] == {"charge": handled}
    assert wf.activity("notify").output["errors"] == {}
    assert_contract_holds(wf, defn)


def test_a_handler_never_runs_unless_called_on(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("calm", (
        Act("work", launcher=py("wb_data_activities:noop"), on_failure="cleanup"),
        Act("cleanup", launcher=py("wb_data_activities:handler")),
    ))
    wb.register_workflow(defn)
    wf = wb.wait(wb.start_workflow("calm"), timeout=30)
    assert wf.state is W.COMPLETED
    assert [a.activity_name for a in wf.activities] == ["work"]


def test_continue_lets_dependents_run_seeing_the_failure(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("onward", (
        Act("optional", on_failure="continue"),
        Act("other", launcher=py("wb_data_activities:noop")),
        Act("last", ("optional", "other"), launcher=py("wb_data_activities:summary")),
    ))
    wb.register_workflow(defn)
    wx = wb.start_workflow("onward")
    aeid = activity_exec_id(wx, "optional", 1)
    wb.transition_activity(aeid, Transition.RUNNING)
    wb.transition_activity(aeid, Transition.FAILED, error="source offline")
    wf = wb.wait(wx, timeout=30)
    assert wf.state is W.COMPLETED, wf
    seen = wf.activity("last").output
    assert seen["upstream"] == {"optional": None, "other": None}
    assert seen["errors"] == {"optional": "source offline"}
    assert_contract_holds(wf, defn)


def test_a_failing_handler_fails_the_workflow(wb: Whimbrel) -> None:
    defn = WorkflowDefinition("doomed", (
        Act("charge", launcher=py("wb_data_activities:refuse"), on_failure="refund"),
        Act("refund", launcher=py("wb_data_activities:refuse")),
    ))
    wb.register_workflow(defn)
    wf = wb.wait(wb.start_workflow("doomed"), timeout=30)
    assert wf.state is W.FAILED
    assert "refund" in (wf.error or "")
    assert_contract_holds(wf, defn)
