"""Index keys without a hot spot (issue 19, item 3): heartbeats that write no index
entry, the sweep re-arming a timer only when it fires early, rejections of one day
spread over write shards."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState as A
from whimbrel import Whimbrel, WorkflowDefinition
from whimbrel.contract.errors import StateConflict
from whimbrel.contract.records import RejectionRecord
from whimbrel.store import specs
from whimbrel.testing import StepClock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ is not installed
from benchmarks.billing import Meter

CLOCK = StepClock


def test_a_heartbeat_writes_no_index_entry_and_the_sweep_still_times_out(
        ddb_endpoint: str, table_prefix: str, clock: StepClock) -> None:
    meter = Meter(ddb_endpoint, table_prefix)
    try:
        with Whimbrel(meter.url, table_prefix, clock=clock) as wb:
            wb.create_tables()
            wb.register_workflow(WorkflowDefinition("beat", (Act(
                "work", heartbeat_timeout_seconds=30),)))
            wb.start_workflow("beat")
            act = wb.claim(workflow_name="beat")
            assert act is not None
            armed = wb.store.get_activity(act.activity_exec_id)
            assert armed is not None and armed.timer_epoch == clock() + 30
            meter.settle()
            meter.drain()
            for _ in range(10):
                clock.advance(20)
                wb.heartbeat(act.activity_exec_id)
            beats = meter.drain()
            index_units = {cat: n for r in beats for (cat, _k), n in r.wkeys.items()
                           if "." in cat}
            assert [r.op for r in beats].count("UpdateItem") == 10 and index_units == {}
            item = wb.store.get_activity(act.activity_exec_id)
            assert item is not None and item.timer_epoch == armed.timer_epoch  # not moved
            assert item.deadline_epoch == clock() + 30
            # The armed timer fired long ago: the sweep finds the real deadline later and
            # re-arms the entry to it (one index move), times nothing out.
            report = wb.sweep(clock())
            assert report.timed_out == []
            item = wb.store.get_activity(act.activity_exec_id)
            assert item is not None and item.timer_epoch == clock() + 30
            # Silent from now on: the next sweep past the real deadline and the in-flight
            # grace (docs/architecture.md) times it out.
            assert wb.sweep(clock.advance(29)).timed_out == []
            assert wb.sweep(clock.advance(1)).timed_out == []  # its result may be in flight
            grace = wb.engine.in_flight_grace_seconds
            assert wb.sweep(clock.advance(grace)).timed_out == [act.activity_exec_id]
            assert wb.get_activity(act.activity_exec_id).state is A.TIMED_OUT
    finally:
        meter.close()


def test_a_heartbeat_after_the_sweep_read_still_wins(wb: Whimbrel, clock: StepClock) -> None:
    # The sweep judged the attempt timed out from a read; a heartbeat written in time
    # landed before its move. The move's condition sees the new deadline_epoch and
    # loses. (A beat written past the deadline times it out instead: test_i31_deadlines.)
    wb.register_workflow(WorkflowDefinition("race", (Act("work", heartbeat_timeout_seconds=30),)))
    wb.start_workflow("race")
    act = wb.claim(workflow_name="race")
    assert act is not None
    clock.advance(29)
    seen = wb.store.get_activity(act.activity_exec_id)  # the sweep's read, then a beat
    assert seen is not None and seen.deadline_epoch is not None
    wb.heartbeat(act.activity_exec_id)
    clock.advance(2)  # past the deadline the sweep read
    assert clock() > seen.deadline_epoch
    with pytest.raises(StateConflict):
        wb.store.move_activity(act.activity_exec_id, A.RUNNING, [A.TIMED_OUT], {},
                               now=clock(), actor="sweep", due_by=clock())
    assert wb.get_activity(act.activity_exec_id).state is A.RUNNING


def test_rejections_of_a_day_spread_over_shards_and_list_as_one(wb: Whimbrel) -> None:
    day = "2026-11-25"
    for i in range(40):
        wb.store.cold.put_rejection(RejectionRecord(
            rejection_day=day, rejection_id=f"r-{i:03d}", source="workflow_request",
            reason="bad", error_type="InvalidInput", record="{}", when_epoch=float(i)))
    # One row written before the keys were sharded, on the day itself.
    wb.store.botocore.put_item(TableName=specs.REJECTION.table_name(wb.store.table_prefix),
                               Item={"rejection_day": {"S": day}, "rejection_id": {"S": "r-999"},
                                     "source": {"S": "activity_event"}, "reason": {"S": "old"},
                                     "error_type": {"S": "InvalidInput"}, "record": {"S": "{}"},
                                     "when_epoch": {"N": "1"}})
    keys = {i["rejection_day"]["S"] for i in wb.store.botocore.scan(
        TableName=specs.REJECTION.table_name(wb.store.table_prefix))["Items"]}
    assert len(keys) > specs.REJECTION_SHARDS // 2
    listed = wb.list_rejections(day, limit=100)
    assert [r.rejection_id for r in listed] == ["r-999"] + [f"r-{i:03d}" for i in
                                                           reversed(range(40))]
    assert {r.day for r in listed} == {day}
    assert [r.rejection_id for r in wb.list_rejections(day, limit=3)] == [
        "r-999", "r-039", "r-038"]
