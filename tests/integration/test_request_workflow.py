"""``Whimbrel.request_workflow`` (Simple Lambda API writer): request ids and unknown names."""

from __future__ import annotations

import pytest

from whimbrel import ActivityDefinition, Whimbrel, WorkflowDefinition
from whimbrel.contract.errors import DefinitionNotFound, InvalidInput, RequestIdReused
from whimbrel.contract.ids import workflow_exec_id_for

STEP = WorkflowDefinition("step", (ActivityDefinition("only"),))
OTHER = WorkflowDefinition("other", (ActivityDefinition("only"),))


def test_request_id_is_the_callers_and_idempotent(wb: Whimbrel) -> None:
    wb.register_workflow(STEP)
    assert wb.request_workflow("step", {"n": 1}, request_id="order-7") == "order-7"
    row = wb.store.cold.get_request("order-7")
    assert row is not None and row.workflow_name == "step" and not row.manual
    # Written again: the same single request; with another input it is refused (issue
    # 31: it used to return the first request silently), the first input kept.
    assert wb.request_workflow("step", {"n": 1}, request_id="order-7") == "order-7"
    with pytest.raises(RequestIdReused, match=r"'order-7' .* with another input"):
        wb.request_workflow("step", {"n": 2}, request_id="order-7")
    again = wb.store.cold.get_request("order-7")
    assert again is not None and again.input == row.input
    # Without one, a fresh id each time.
    first, second = wb.request_workflow("step"), wb.request_workflow("step")
    assert first != second and wb.store.cold.get_request(first) is not None


def test_request_id_checked_like_start_workflow(wb: Whimbrel) -> None:
    wb.register_workflow(STEP)
    wb.register_workflow(OTHER)
    wb.request_workflow("step", request_id="taken")
    with pytest.raises(InvalidInput, match=r"already stands for run .* of workflow 'step', "
                                           r"not 'other'"):
        wb.request_workflow("other", request_id="taken")
    for bad in (123, "r-\udc80", ""):
        with pytest.raises(InvalidInput, match="workflow_request_id must be a non-empty"):
            wb.request_workflow("step", request_id=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="workflow_request_id"):
            workflow_exec_id_for(bad)  # type: ignore[arg-type]  # the same check


def test_unregistered_workflow_is_refused_and_nothing_written(wb: Whimbrel) -> None:
    with pytest.raises(DefinitionNotFound, match="no registered workflow definition 'ghost'"
                       ) as caught:
        wb.request_workflow("ghost", request_id="ghost-1")
    assert caught.value.workflow_name == "ghost"
    assert wb.store.cold.get_request("ghost-1") is None
    wb.register_workflow(STEP)
    with pytest.raises(DefinitionNotFound, match="'step' version 9"):
        wb.request_workflow("step", version=9, request_id="step-v9")
    assert wb.store.cold.get_request("step-v9") is None
