"""Queued runs, priority and pools through the Simple API (issue 22): raw ``PutItem``
rows, handled by the local runtime's real streams and handlers."""

from __future__ import annotations

import pytest
from e2e_support import RawClient, event_row, rejection_about

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState as A
from whimbrel import LauncherSpec, WorkflowDefinition
from whimbrel import WorkflowState as W
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import wait_until

pytestmark = pytest.mark.slow

ONE = WorkflowDefinition("rows_one", (Act("a", launcher=LauncherSpec.external(),
                                          pool="row_pool"),), max_running=1)


def _state(rt: LocalRuntime, wx: str) -> W | None:
    item = rt.client.store.get_workflow(wx)
    return None if item is None else item.state


def test_rows_queue_runs_that_start_by_their_priority(runtime: LocalRuntime,
                                                      raw: RawClient) -> None:
    rt = runtime
    rt.client.set_pool("row_pool", slots=1, per_second=None)
    rt.client.register_workflow(ONE)
    first = workflow_exec_id_for(raw.request("rows_one"))
    wait_until(lambda: _state(rt, first) is W.RUNNING, timeout=15)
    late = workflow_exec_id_for(raw.request("rows_one", priority={"N": "7"}))
    soon = workflow_exec_id_for(raw.request("rows_one", priority={"N": "1"}))
    gone = workflow_exec_id_for(raw.request("rows_one"))
    for wx in (late, soon, gone):
        wait_until(lambda wx=wx: _state(rt, wx) is W.QUEUED, timeout=15)
    assert rt.client.get_workflow(soon).priority == 1
    # A queued run is cancelled by a CANCEL row naming it, at once (nothing runs).
    cancel = raw.row("CANCEL", workflow_exec_id=gone)
    assert event_row(rt, cancel)["outcome"]["S"] == "APPLIED"
    wait_until(lambda: _state(rt, gone) is W.CANCELLED, timeout=15)
    # The first run's attempt ends: the most urgent queued run starts, not the oldest.
    aeid = activity_exec_id(first, "a", 1)
    raw.row("RUNNING", activity_exec_id=aeid)
    wait_until(lambda: rt.client.get_activity(aeid).state is A.RUNNING, timeout=15)
    raw.event(aeid, "COMPLETED", output={"ok": 1})
    wait_until(lambda: _state(rt, soon) is W.RUNNING, timeout=15)
    assert _state(rt, late) is W.QUEUED
    assert rt.client.store.get_workflow(soon).pool_slot == "run:rows_one#0"  # type: ignore[union-attr]
    # Its attempt is created, then admitted by the pool (the stream handler's next write).
    slot = wait_until(lambda: (rt.client.get_workflow(soon).latest_activities.get("a")
                               or None) and rt.client.get_workflow(soon).activity("a").pool_slot,
                      timeout=15)
    assert slot == "row_pool#0"
    history = [h.state for h in rt.client.get_workflow(soon).history]
    assert history[:3] == ["REQUESTED", "QUEUED", "RUNNING"]


def test_a_row_with_a_bad_priority_is_rejected_and_starts_nothing(
        runtime: LocalRuntime, raw: RawClient) -> None:
    rt = runtime
    rt.client.set_pool("row_pool", slots=1, per_second=None)
    rt.client.register_workflow(ONE)
    for bad in ({"N": "12"}, {"N": "2.5"}, {"S": "high"}):
        request_id = raw.request("rows_one", priority=bad)
        rejected = rejection_about(rt, request_id)
        assert "priority" in rejected.reason
        assert rt.client.store.get_workflow(workflow_exec_id_for(request_id)) is None


KEYED = WorkflowDefinition("rows_keyed", (Act("a", launcher=LauncherSpec.external(),
                                              pool="row_pool", pool_key="input.tenant"),))


def test_request_rows_of_a_keyed_pool_run_one_per_tenant(runtime: LocalRuntime,
                                                         raw: RawClient) -> None:
    """Issue 29 item 5 through raw rows: a 1-slot pool keyed by tenant admits one attempt
    of each tenant; a tenant's second waits for that tenant's slot only."""
    rt = runtime
    rt.client.set_pool("row_pool", slots=1, per_second=None)
    rt.client.register_workflow(KEYED)
    a1, a2, b1 = (workflow_exec_id_for(raw.request("rows_keyed", {"tenant": t}))
                  for t in ("a", "a", "b"))

    def slot(wx: str) -> str | None:
        item = rt.client.store.get_activity(activity_exec_id(wx, "a", 1))
        return None if item is None else item.pool_slot

    def wait(wx: str) -> str | None:
        item = rt.client.store.get_activity(activity_exec_id(wx, "a", 1))
        return None if item is None else item.pool_wait

    # Rows in different stream shards reach the handler in any order: either of
    # tenant a's runs may take its slot first.
    first = wait_until(lambda: next((wx for wx in (a1, a2) if slot(wx)), None), timeout=15)
    a1, a2 = (a1, a2) if first == a1 else (a2, a1)
    assert slot(a1) == "row_pool~a#0"
    assert wait_until(lambda: slot(b1), timeout=15) == "row_pool~b#0"
    assert wait_until(lambda: wait(a2), timeout=15) == "row_pool~a"
    assert slot(a2) is None
    aeid = activity_exec_id(a1, "a", 1)
    raw.row("RUNNING", activity_exec_id=aeid)
    wait_until(lambda: rt.client.get_activity(aeid).state is A.RUNNING, timeout=15)
    raw.event(aeid, "COMPLETED", output={"ok": 1})
    assert wait_until(lambda: slot(a2), timeout=15) == "row_pool~a#0"
