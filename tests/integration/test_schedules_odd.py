"""Schedules that are odd or raced (issue 31), on DynamoDB Local: a stored spec with a
field this version does not know or a value of a wrong type never stops the other
schedules (sweep, ``list_schedules``); two sweepers racing at a fire time never break
``overlap="skip"``; host-dependent zone names are refused; the one-firing recipe of
docs/schedules.md works with a time that is not a whole second."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from whimbrel import (
    ActivityDefinition,
    InvalidInput,
    LauncherSpec,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.contract.ids import shard_of, workflow_exec_id_for
from whimbrel.contract.schedules import fire_request_id
from whimbrel.engine.schedules import Schedules
from whimbrel.store.specs import SCHEDULE_SHARDS
from whimbrel.testing import RecordingLauncher, StepClock

CLOCK = StepClock
LAMBDA = LauncherSpec("lambda", {"function": "f"})


@pytest.fixture
def tick(wb: Whimbrel, clock: StepClock) -> str:
    """A one-activity workflow whose runs stay RUNNING, the clock on a minute + 10 s."""
    wb.register_workflow(WorkflowDefinition("tick", (ActivityDefinition("a", launcher=LAMBDA),)))
    clock.now = float(int(clock.now) // 60 * 60 + 10)
    return "tick"


def _minute(clock: StepClock, k: int = 1) -> float:
    return float((int(clock.now) // 60 + k) * 60)


def _runs(wb: Whimbrel, prefix: str) -> list[str]:
    return sorted(r for w in wb.list_workflows(name="tick", limit=500).items
                  if (r := w.workflow_request_id or "").startswith(prefix + "@"))


def edit_spec(wb: Whimbrel, schedule_id: str, **fields: Any) -> dict[str, Any]:
    """A hand edit (or a newer version's write) of a stored spec: ``fields`` set in it."""
    table = wb.store.table_name("schedule")
    key = {"schedule_id": {"S": schedule_id}}
    item = wb.store.tables.client.call("GetItem", {"TableName": table, "Key": key})["Item"]
    spec = {**json.loads(item["spec"]["S"]), **fields}
    wb.store.tables.client.call("UpdateItem", {
        "TableName": table, "Key": key, "UpdateExpression": "SET spec = :s",
        "ExpressionAttributeValues": {":s": {"S": json.dumps(spec)}}})
    return spec


def test_an_odd_stored_schedule_is_listed_with_its_problem_and_the_others_fire(
        wb: Whimbrel, clock: StepClock, tick: str) -> None:
    for sid in ("a_newer", "b_odd", "c_plain", "d_odd_status"):
        wb.create_schedule(sid, tick, every_seconds=60, overlap="allow")
    # A newer version's field: ignored, kept. A wrong type and an unknown value: the
    # schedule is skipped with its problem.
    edit_spec(wb, "a_newer", jitter_seconds=5, retry={"max": 3})
    edit_spec(wb, "b_odd", catchup_seconds="an hour", overlap="cancel_previous")
    wb.store.tables.client.call("UpdateItem", {
        "TableName": wb.store.table_name("schedule"),
        "Key": {"schedule_id": {"S": "d_odd_status"}},
        "UpdateExpression": "SET skipped = :s, #st = :x",
        "ExpressionAttributeNames": {"#st": "status"},  # a newer version's status
        "ExpressionAttributeValues": {":s": {"S": "many"}, ":x": {"S": "SUSPENDED"}}})
    fire = clock.now = _minute(clock)
    report = wb.sweep(clock())  # raised TypeError before issue 31
    assert report.errors == []
    assert _runs(wb, "a_newer") == [fire_request_id("a_newer", fire)]
    assert _runs(wb, "c_plain") == [fire_request_id("c_plain", fire)]
    assert _runs(wb, "b_odd") == [] and _runs(wb, "d_odd_status") == []
    assert wb.engine.incidents["schedule_skipped_odd"] == 2

    listed = {i.schedule_id: i for i in wb.list_schedules()}  # raised TypeError too
    assert sorted(listed) == ["a_newer", "b_odd", "c_plain", "d_odd_status"]
    newer = listed["a_newer"]
    assert newer.problem is None and newer.ignored_fields == ("jitter_seconds", "retry")
    assert newer.last_run == workflow_exec_id_for(fire_request_id("a_newer", fire))
    odd = listed["b_odd"]
    assert odd.problem is not None and "catchup_seconds" in odd.problem \
        and "overlap" in odd.problem
    assert odd.next_fire_epoch == fire and odd.last_run is None  # left as it was
    assert odd.to_dict()["problem"] == odd.problem
    odd_status = listed["d_odd_status"]
    assert odd_status.status == "SUSPENDED"  # shown as stored
    assert "skipped holds 'many'" in (odd_status.problem or "")
    assert "status 'SUSPENDED' is not one this version knows" in (odd_status.problem or "")
    assert wb.get_schedule("b_odd").problem == odd.problem
    # The newer version's fields are still in the item after this version fired it.
    item = wb.store.tables.client.call("GetItem", {
        "TableName": wb.store.table_name("schedule"),
        "Key": {"schedule_id": {"S": "a_newer"}}})["Item"]
    assert json.loads(item["spec"]["S"])["jitter_seconds"] == 5

    # What acts on it is refused with its problem; pausing and deleting still work.
    with pytest.raises(InvalidInput, match="cannot be backfilled by this version"):
        wb.backfill_schedule("b_odd", fire - 120, fire)
    assert wb.pause_schedule("b_odd").status == "PAUSED"
    with pytest.raises(InvalidInput, match=r"cannot be resumed by this version: .*overlap"):
        wb.resume_schedule("b_odd")
    wb.store.tables.client.call("UpdateItem", {  # back as it was: ACTIVE, due at the fire
        "TableName": wb.store.table_name("schedule"), "Key": {"schedule_id": {"S": "b_odd"}},
        "UpdateExpression": "SET #s = :a, next_fire_epoch = :n, fire_shard = :k",
        "ExpressionAttributeNames": {"#s": "status"},
        "ExpressionAttributeValues": {":a": {"S": "ACTIVE"}, ":n": {"N": str(int(fire))},
                                      ":k": {"S": shard_of("b_odd", SCHEDULE_SHARDS)}}})
    # Fixed by hand: it fires again (its missed firing within catch-up too).
    edit_spec(wb, "b_odd", catchup_seconds=3600, overlap="allow")
    clock.now = _minute(clock)
    wb.sweep(clock())
    assert _runs(wb, "b_odd") == [fire_request_id("b_odd", f) for f in (fire, clock.now)]


@pytest.mark.parametrize("stored", [
    {"S": "not json {"}, {"S": "[1, 2]"}, {"S": '{"schedule_id": 7}'}, {"N": "5"},
    {"S": '{"cron": ["0", "*"], "timezone": 5, "every_seconds": null}'},
])
def test_a_spec_no_version_can_read_is_still_listed(
        wb: Whimbrel, clock: StepClock, tick: str, stored: dict[str, str]) -> None:
    wb.create_schedule("odd", tick, every_seconds=60, overlap="allow")
    wb.create_schedule("fine", tick, every_seconds=60, overlap="allow")
    wb.store.tables.client.call("UpdateItem", {
        "TableName": wb.store.table_name("schedule"), "Key": {"schedule_id": {"S": "odd"}},
        "UpdateExpression": "SET spec = :s", "ExpressionAttributeValues": {":s": stored}})
    clock.now = _minute(clock)
    wb.sweep(clock())
    assert _runs(wb, "fine") == [fire_request_id("fine", clock.now)]
    assert _runs(wb, "odd") == []
    odd = wb.get_schedule("odd")
    assert odd.problem and odd.schedule_id == "odd" and odd.schedule.workflow_name == tick
    json.dumps(odd.to_dict())  # the CLI's --json and the console can show it


class _Pause:
    """A store write hook that runs ``then`` once, just before the first write to the
    ``schedule`` table (the firing's decision on this version; the advance before)."""

    def __init__(self, then: Any) -> None:
        self.then = then
        self.done = False

    def __call__(self, phase: str, operation: str, table: str) -> None:
        if phase == "before" and table == "schedule" and not self.done:
            self.done = True
            self.then()


def test_two_sweepers_racing_at_a_fire_time_never_break_overlap_skip(
        wb: Whimbrel, clock: StepClock, tick: str, ddb_endpoint: str,
        launched: RecordingLauncher) -> None:
    """Sweeper A reads the previous run live and decides to skip; before its write
    lands, the run ends and sweeper B (another engine on the same tables) reads the same
    schedule and finds it ended. B must not start a run that the schedule does not
    record (on main it did: the next firing then started beside it)."""
    other = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=wb.store.table_prefix,
                     clock=clock, launchers={"lambda": launched})
    try:
        wb.create_schedule("skipper", tick, every_seconds=60)  # overlap="skip"
        first = clock.now = _minute(clock)
        wb.sweep(clock())
        r1 = workflow_exec_id_for(fire_request_id("skipper", first))
        a, b = wb.engine.feature(Schedules), other.engine.feature(Schedules)
        b_at_write, a_done = threading.Event(), threading.Event()
        errors: list[BaseException] = []

        def b_waits() -> None:  # B's first schedule write waits for A's to land
            b_at_write.set()
            assert a_done.wait(30)

        def sweeper_b() -> None:
            try:
                b.fire("skipper", second)
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        def between() -> None:  # A has decided (run live): the run ends, B reads
            wb.cancel_workflow(r1)
            thread.start()
            assert b_at_write.wait(30), "sweeper B never reached its schedule write"

        second = clock.now = _minute(clock)
        thread = threading.Thread(target=sweeper_b)
        other.store.write_hooks.append(_Pause(b_waits))
        wb.store.write_hooks.append(_Pause(between))
        a.fire("skipper", second)
        a_done.set()
        thread.join(30)
        assert errors == []
        info = wb.get_schedule("skipper")
        live = [w.workflow_exec_id for w in wb.list_workflows(name=tick, limit=50).items
                if w.state.value in ("REQUESTED", "RUNNING")]
        # Whatever runs, the schedule knows it: its next firing sees it live.
        assert set(live) <= {info.last_run}, (live, info)
        assert info.skipped == 1 and _runs(wb, "skipper") == [fire_request_id("skipper",
                                                                             first)]
        third = clock.now = _minute(clock)
        wb.sweep(clock())
        assert _runs(wb, "skipper") == [fire_request_id("skipper", f) for f in (first, third)]
    finally:
        other.close()


def test_concurrent_sweepers_on_two_engines_keep_skip(
        wb: Whimbrel, clock: StepClock, tick: str, ddb_endpoint: str,
        launched: RecordingLauncher) -> None:
    """Four sweepers on two engines at every fire time while the runs end at random
    points: never two runs of the schedule live at once."""
    other = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=wb.store.table_prefix,
                     clock=clock, launchers={"lambda": launched})
    try:
        wb.create_schedule("busy", tick, every_seconds=60)
        features = [wb.engine.feature(Schedules), other.engine.feature(Schedules)] * 2
        errors: list[BaseException] = []
        for k in range(6):
            now = clock.now = _minute(clock)
            barrier = threading.Barrier(len(features) + 1)

            def sweeper(feature: Schedules, now: float = now,
                        barrier: threading.Barrier = barrier) -> None:
                try:
                    barrier.wait()
                    feature.fire("busy", now)
                except BaseException as exc:  # surfaced below
                    errors.append(exc)

            def ender(barrier: threading.Barrier = barrier, k: int = k) -> None:
                barrier.wait()
                last = wb.get_schedule("busy").last_run
                if last is not None and k % 2:
                    wb.cancel_workflow(last)

            threads = [threading.Thread(target=sweeper, args=(f,)) for f in features]
            threads.append(threading.Thread(target=ender))
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert errors == []
            live = [w.workflow_exec_id for w in wb.list_workflows(name=tick, limit=50).items
                    if w.state.value in ("REQUESTED", "RUNNING")]
            assert len(live) <= 1 and set(live) <= {wb.get_schedule("busy").last_run}
    finally:
        other.close()


@pytest.mark.parametrize("zone", ["localtime", "posixrules", "right/UTC",
                                  "posix/Europe/Berlin", "/etc/localtime", "Europe",
                                  "../zoneinfo/UTC"])
def test_host_dependent_and_non_iana_zone_names_are_refused(
        wb: Whimbrel, tick: str, zone: str) -> None:
    with pytest.raises(InvalidInput, match="not a known IANA time zone"):
        wb.create_schedule("tz", tick, cron="0 2 * * *", timezone=zone)
    assert wb.list_schedules() == []
    wb.create_schedule("berlin", tick, cron="0 2 * * *", timezone="Europe/Berlin")
    wb.create_schedule("eastern", tick, cron="0 2 * * *", timezone="US/Eastern")


def test_the_one_firing_recipe_works_for_a_time_that_is_not_a_whole_second(
        wb: Whimbrel, clock: StepClock, tick: str) -> None:
    # docs/schedules.md: "for one firing: every_seconds with start_at and end_at both at
    # that time"
    at = clock.now + 100.25
    info = wb.create_schedule("once", tick, every_seconds=60, start_at=at, end_at=at)
    assert info.next_fire_epoch == float(int(at) + 1)
    when = datetime.fromtimestamp(clock.now + 200.5, UTC)  # an aware datetime, too
    wb.create_schedule("once_dt", tick, every_seconds=3600, start_at=when, end_at=when)
    clock.now = at
    wb.sweep(clock())
    assert _runs(wb, "once") == []  # not before its time
    clock.now = int(at) + 1.0
    wb.sweep(clock())
    assert _runs(wb, "once") == [fire_request_id("once", int(at) + 1)]
    assert wb.get_schedule("once").status == "ENDED"
    clock.now = when.timestamp() + 1
    wb.sweep(clock())
    assert _runs(wb, "once_dt") == [fire_request_id("once_dt", int(when.timestamp()) + 1)]
    assert wb.get_schedule("once_dt").status == "ENDED"


def test_odd_schedules_at_the_head_of_a_shard_never_hide_the_others(
        wb: Whimbrel, clock: StepClock, tick: str) -> None:
    """Odd schedules are left due, so they stay at the head of their shard's page of
    the due index: the pass reads past them (here a page of 2 and 3 odd ones ahead)."""
    feature = wb.engine.feature(Schedules)
    feature.due_per_shard = 2
    same = [sid for k in range(400) if shard_of(sid := f"s{k}", SCHEDULE_SHARDS) == "0"][:5]
    fire = _minute(clock)
    for sid in same:
        wb.create_schedule(sid, tick, every_seconds=60, overlap="allow")
    odd, good = same[:3], same[3:]
    for sid in odd:
        edit_spec(wb, sid, every_seconds="a minute")
        wb.store.tables.client.call("UpdateItem", {  # due earlier than the others: first
            "TableName": wb.store.table_name("schedule"), "Key": {"schedule_id": {"S": sid}},
            "UpdateExpression": "SET next_fire_epoch = :n",
            "ExpressionAttributeValues": {":n": {"N": str(int(fire) - 30)}}})
    assert set(wb.store.schedules.due_schedules("0", fire, 2)) <= set(odd)  # the first page
    clock.now = fire
    wb.sweep(clock())
    for sid in good:
        assert _runs(wb, sid) == [fire_request_id(sid, fire)], sid
    assert wb.engine.incidents["schedule_skipped_odd"] == 3
