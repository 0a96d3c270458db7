"""Issue 20 through raw rows, the real stream handlers and the local runtime: late results
kept (decision 5), results written in time count (6), every row marked (9), CANCEL by run
id (10), map-item failure events (11).

Written to fail on the main of the day the issue was filed, except
``test_heartbeats_keep_an_activity_alive_on_an_injected_clock``: the deterministic
replacement of ``tests/e2e/test_simple_api.py::
test_heartbeats_through_the_full_logic_api_keep_an_activity_alive`` (flaky under load: a
0.6 s real-time heartbeat timeout).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from e2e_support import RawClient, activity_state, event_row, rejection_about, wait_workflow

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    LauncherSpec,
    RetryPolicy,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import StepClock, wait_until

pytestmark = pytest.mark.slow
A, W = ActivityState, WorkflowState
EXT = LauncherSpec.external()
Record = dict[str, Any]


class Gate:
    """A delivery policy that holds the stream's batches while closed: the pump's thread
    waits in :meth:`plan` until the test opens the gate (a delivery delayed as long as
    the test wants, with no sleep)."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.open.set()
        self.holding = threading.Event()

    def plan(self, batch: Sequence[Record]) -> list[list[Record]]:
        if not self.open.is_set():
            self.holding.set()
            self.open.wait(120)
        return [list(batch)]

    def drain(self) -> list[list[Record]]:
        return []


def _runtime(ddb_endpoint: str, table_prefix: str, clock: StepClock,
             gate: Gate | None = None, **kw: Any) -> LocalRuntime:
    """A runtime on ``clock`` with no scheduled sweep (the test runs each pass); with
    ``gate``, the activity_event stream is delivered through it."""
    def delivery(consumer: Any) -> Gate | None:
        return gate if consumer.name == "activity_event" else None
    return LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0, clock=clock,
                        delivery=delivery if gate is not None else None,
                        lambda_log_level="WARNING", **kw)


@pytest.fixture
def stopped(ddb_endpoint: str, table_prefix: str) -> Iterator[Callable[..., LocalRuntime]]:
    """Builds a started runtime (see ``_runtime``) and stops it after the test."""
    made: list[LocalRuntime] = []

    def make(clock: StepClock, gate: Gate | None = None, **kw: Any) -> LocalRuntime:
        rt = _runtime(ddb_endpoint, table_prefix, clock, gate, **kw).start()
        made.append(rt)
        return rt
    yield make
    for rt in made:
        if rt.pumps:
            for pump in rt.pumps.values():
                if isinstance(pump.delivery, Gate):
                    pump.delivery.open.set()
        rt.client.store.delete_tables()
        rt.stop()


def _claim(rt: LocalRuntime, name: str) -> str:
    got = wait_until(lambda: rt.client.claim(workflow_name=name), timeout=30,
                     message=f"nothing of {name} to claim")
    assert got.state is A.RUNNING
    return got.activity_exec_id


def _mark(row: Record) -> str:
    return " ".join(str(row.get(k, {}).get("S", "")) for k in ("outcome", "reason"))


# -- decision 5: a late result through a raw row -------------------------------------------

def test_a_raw_completed_row_after_time_out_is_kept_as_late_output(
        stopped: Callable[..., LocalRuntime], raw: RawClient) -> None:
    """Finding: a late COMPLETED after TIMED_OUT was refused (StateConflict) and its output
    dropped. The clock runs 100 s behind real time, so the row is written (by DynamoDB's
    clock) after the deadline as well."""
    clock = StepClock(time.time() - 100)
    rt = stopped(clock)
    rt.client.register_workflow(WorkflowDefinition("i20_late_row", (Act(
        "w", launcher=EXT, heartbeat_timeout_seconds=10.0,
        retry=RetryPolicy(max_attempts=2, initial_interval_seconds=0.0)),)))
    wx = rt.client.start_workflow("i20_late_row")
    first = _claim(rt, "i20_late_row")
    clock.advance(20.0)
    assert first in rt.client.sweep().timed_out
    event_id = raw.event(first, "COMPLETED", output={"rows": 42})
    row = event_row(rt, event_id)
    assert "late output" in _mark(row).lower().replace("_", " "), row
    after = rt.client.get_activity(first)
    assert after.state is A.TIMED_OUT
    assert after.late_output == {"rows": 42}
    assert rt.client.get_activity(activity_exec_id(wx, "w", 2)).state is A.READY


# -- decision 6: a result written in time counts -------------------------------------------

@pytest.mark.parametrize("sweep_in_between", [True, False])
def test_a_completed_row_written_before_the_deadline_counts_when_delivered_after_it(
        stopped: Callable[..., LocalRuntime], raw: RawClient, sweep_in_between: bool) -> None:
    """Finding: a Simple API result written before the heartbeat deadline was lost when the
    stream delivered it after the deadline. The row is written at real time t (the
    stream record's ApproximateCreationDateTime), well before the deadline (t0 + 60 s on
    the engine's clock); its delivery is held until the engine's clock has passed the
    deadline (and, with ``sweep_in_between``, a sweep has run)."""
    clock = StepClock()
    gate = Gate()
    rt = stopped(clock, gate)
    rt.client.register_workflow(WorkflowDefinition("i20_in_time", (Act(
        "w", launcher=EXT, heartbeat_timeout_seconds=60.0),)))
    wx = rt.client.start_workflow("i20_in_time")
    aeid = _claim(rt, "i20_in_time")
    gate.open.clear()
    raw.event(aeid, "COMPLETED", output={"rows": 42})
    wait_until(gate.holding.is_set, timeout=30, message="the row never reached the pump")
    clock.advance(60.25)  # just past the deadline: the row is in flight
    if sweep_in_between:
        rt.client.sweep()
    gate.open.set()
    wait_until(lambda: activity_state(rt, aeid) in ("COMPLETED", "TIMED_OUT", "FAILED"),
               timeout=30, message="the attempt never ended")
    clock.advance(120.0)
    rt.client.sweep()
    got = rt.client.get_activity(aeid)
    assert got.state is A.COMPLETED, got
    assert got.output == {"rows": 42}
    assert rt.client.wait(wx, timeout=15).state is W.COMPLETED


def test_heartbeats_keep_an_activity_alive_on_an_injected_clock(
        stopped: Callable[..., LocalRuntime], raw: RawClient) -> None:
    """Heartbeats through the Full Logic API keep a Simple API activity alive past its
    timeout many times over; its silent twin times out in the same sweeps."""
    clock = StepClock()
    rt = stopped(clock)
    for name in ("i20_beating", "i20_silent"):
        rt.client.register_workflow(WorkflowDefinition(name, (
            Act("worker", launcher=EXT, heartbeat_timeout_seconds=10.0),)))
    beating = rt.client.start_workflow("i20_beating")
    silent = rt.client.start_workflow("i20_silent")
    alive, quiet = activity_exec_id(beating, "worker", 1), activity_exec_id(silent, "worker", 1)
    for aeid in (alive, quiet):
        wait_until(lambda aeid=aeid: activity_state(rt, aeid) == "READY", timeout=30)  # type: ignore[misc]
        raw.event(aeid, "RUNNING")
    for aeid in (alive, quiet):
        wait_until(lambda aeid=aeid: activity_state(rt, aeid) == "RUNNING", timeout=30)  # type: ignore[misc]
    timed_out: list[str] = []
    for _ in range(6):  # 36 s on the engine's clock: over three timeouts
        clock.advance(6.0)
        rt.client.heartbeat(alive)
        timed_out += rt.client.sweep().timed_out
    assert timed_out == [quiet]
    assert rt.client.get_activity(alive).state is A.RUNNING
    raw.event(alive, "COMPLETED")
    assert wait_workflow_exec(rt, beating).state is W.COMPLETED


def wait_workflow_exec(rt: LocalRuntime, wx: str) -> Any:
    def done() -> Any:
        wf = rt.client.get_workflow(wx)
        return wf if wf.state.is_terminal else None
    return wait_until(done, timeout=30, message=f"workflow {wx} did not end")


# -- decision 9: every row gets outcome and reason ------------------------------------------

def test_rejected_rows_are_marked_rejected_with_a_reason(runtime: LocalRuntime,
                                                         raw: RawClient) -> None:
    """Finding: rows that fail validation got a rejection record, but the row itself never
    got ``outcome``/``reason``: a sender polling its row waited forever."""
    runtime.client.register_workflow(WorkflowDefinition("i20_marks", (
        Act("w", launcher=EXT),
        Act("gate", launcher=LauncherSpec.approval(approvers=["alice"])))))
    wx = runtime.client.start_workflow("i20_marks")
    aeid, gate = activity_exec_id(wx, "w", 1), activity_exec_id(wx, "gate", 1)
    wait_until(lambda: activity_state(runtime, gate) == "READY", timeout=30)
    rows = {
        "typo COMPLETE": raw.row("COMPLETE", activity_exec_id=aeid),
        "N where S is due": raw.row("COMPLETED", activity_exec_id={"N": "5"}),
        "list by": raw.row("APPROVE", activity_exec_id=gate,
                           by={"L": [{"S": "alice"}]}),
    }
    for event_id in rows.values():
        rejection_about(runtime, event_id)  # the handler has seen it
    table = f"{runtime.table_prefix}activity_event"
    marks: dict[str, Record] = {}
    for label, event_id in rows.items():
        marks[label] = raw.ddb.get_item(TableName=table, ConsistentRead=True, Key={
            "activity_event_id": {"S": event_id}})["Item"]
    wrong = {label: {k: v for k, v in item.items() if k in ("outcome", "reason")}
             for label, item in marks.items()
             if item.get("outcome", {}).get("S") != "REJECTED"
             or not item.get("reason", {}).get("S", "").strip()}
    assert wrong == {}, wrong
    assert activity_state(runtime, aeid) == "READY" and activity_state(runtime, gate) == "READY"


# -- decision 10: CANCEL by run id; a cancelled activity ends its run CANCELLED --------------

def test_a_cancel_row_with_only_the_run_id_cancels_the_run(runtime: LocalRuntime,
                                                           raw: RawClient) -> None:
    """Finding: rejected ("needs activity_exec_id"): the Simple API could not cancel a run."""
    runtime.client.register_workflow(WorkflowDefinition("i20_cancel_run", (
        Act("a", launcher=EXT), Act("b", ("a",), launcher=EXT))))
    rid = raw.request("i20_cancel_run")
    wx = workflow_exec_id_for(rid)
    wait_until(lambda: activity_state(runtime, activity_exec_id(wx, "a", 1)) == "READY",
               timeout=30)
    event_id = raw.row("CANCEL", workflow_exec_id=wx)
    assert wait_workflow(runtime, rid, timeout=30).state is W.CANCELLED
    row = event_row(runtime, event_id)
    assert row["outcome"]["S"] == "APPLIED", row


def test_cancelling_the_only_running_activity_ends_the_run_cancelled(
        runtime: LocalRuntime, raw: RawClient) -> None:
    """Finding: cancelling one activity ended the run FAILED, not CANCELLED."""
    runtime.client.register_workflow(WorkflowDefinition("i20_cancel_act", (
        Act("only", launcher=EXT),)))
    rid = raw.request("i20_cancel_act")
    aeid = activity_exec_id(workflow_exec_id_for(rid), "only", 1)
    wait_until(lambda: activity_state(runtime, aeid) == "READY", timeout=30)
    raw.event(aeid, "RUNNING")
    wait_until(lambda: activity_state(runtime, aeid) == "RUNNING", timeout=30)
    raw.event(aeid, "CANCEL")
    wait_until(lambda: activity_state(runtime, aeid) == "CANCELLED_RUNNING", timeout=30)
    raw.event(aeid, "FAILED", error="stopped: cancelled")  # the worker stops as asked
    wf = wait_workflow(runtime, rid, timeout=30)
    assert runtime.client.get_activity(aeid).state is A.CANCELLED
    assert wf.state is W.CANCELLED, wf.state


# -- decision 11: map item failures are events; a wait taken over by continue is not -------

def _envelopes(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_map_item_failing_for_good_publishes_activity_failed(
        ddb_endpoint: str, table_prefix: str, tmp_path: Path, raw: RawClient) -> None:
    """Finding: no "Activity Failed" for a failed map item, and the notify consumer wrote
    a rejection ("has no activity 'm#0'"); a timed-out wait taken over by
    ``on_failure: continue`` still published one."""
    events_file = tmp_path / "events.jsonl"
    with LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0.2,
                      events_file=events_file, lambda_log_level="ERROR") as rt:
        try:
            rt.client.register_workflow(WorkflowDefinition("i20_map_fail", (
                Act("m", launcher=LauncherSpec.python("wb_data_activities:refuse"),
                    map_over="$input.xs"),)))
            rt.client.register_workflow(WorkflowDefinition("i20_wait_continue", (
                Act("S", launcher=LauncherSpec.signal("go", timeout_seconds=1.0),
                    on_failure="continue"),
                Act("after", ("S",), launcher=LauncherSpec.python("wb_test_activities:echo")))))
            mapped = raw.request("i20_map_fail", {"xs": [1]})
            waited = raw.request("i20_wait_continue")
            assert wait_workflow(rt, mapped, timeout=30).state is W.FAILED
            assert wait_workflow(rt, waited, timeout=30).state is W.COMPLETED
            ends = {f"{workflow_exec_id_for(r)}/ended/0" for r in (mapped, waited)}
            wait_until(lambda: ends <= {e["detail"]["event_id"] for e in _envelopes(events_file)},
                       timeout=30, message="the runs' ends were never published")
            rt.wait_idle(timeout=30)
            failed = [e["detail"] for e in _envelopes(events_file)
                      if e["detail-type"] == "Activity Failed"]
            item = activity_exec_id(workflow_exec_id_for(mapped), "m#0", 1)
            wait_s = activity_exec_id(workflow_exec_id_for(waited), "S", 1)
            assert item in {d.get("activity_exec_id") for d in failed}, failed
            assert wait_s not in {d.get("activity_exec_id") for d in failed}, failed
            bad = [r.reason for r in rt.client.list_rejections() if "has no activity" in r.reason]
            assert bad == []
        finally:
            rt.client.store.delete_tables()
