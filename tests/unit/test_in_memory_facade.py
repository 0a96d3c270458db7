"""``Whimbrel.in_memory``: the facade over the twin, raw rows delivered by ``drain()``."""

from __future__ import annotations

import uuid

import pytest

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    LauncherSpec,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.errors import WhimbrelError
from whimbrel.contract.ids import activity_exec_id
from whimbrel.store import specs
from whimbrel.testing import StepClock

pytestmark = pytest.mark.twin


def test_in_memory_refuses_what_only_a_network_store_takes() -> None:
    with pytest.raises(TypeError, match="endpoint_url"):
        Whimbrel.in_memory(endpoint_url="http://localhost:8000")


def test_drain_is_for_an_in_memory_client_only() -> None:
    wb = Whimbrel(endpoint_url="http://127.0.0.1:9")  # never reached
    with pytest.raises(WhimbrelError, match="in_memory"):
        wb.drain()
    wb.close()


def test_a_raw_activity_event_row_completes_its_activity_once_drained_twice() -> None:
    wb = Whimbrel.in_memory(clock=StepClock())
    wb.register_workflow(WorkflowDefinition("raw", (
        ActivityDefinition("only", launcher=LauncherSpec.external()),)))
    wx = wb.start_workflow("raw")
    aeid = activity_exec_id(wx, "only", 1)
    table = specs.ACTIVITY_EVENT.table_name(wb.table_prefix)
    for transition in ("RUNNING", "COMPLETED"):
        wb.twin.call("PutItem", {"TableName": table, "Item": {  # type: ignore[union-attr]
            "activity_event_id": {"S": str(uuid.uuid4())},
            "activity_exec_id": {"S": aeid}, "transition": {"S": transition},
            **({"output": {"M": {"ok": {"BOOL": True}}}} if transition == "COMPLETED"
               else {})}})
    assert wb.get_activity(aeid).state is ActivityState.READY  # nothing behind our back
    assert wb.drain() >= 1
    assert wb.drain() == 0  # read to the end: nothing more to deliver
    wf = wb.get_workflow(wx)
    assert wf.state is WorkflowState.COMPLETED and wf.activity("only").output == {"ok": True}
    wb.close()
