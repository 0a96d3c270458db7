"""Schedules (issue 22) on DynamoDB Local: create, fire through the sweep (one run per
fire time, however many sweepers), catch-up, overlap policies, pause/resume, backfill,
bad input refused with nothing stored; and a future ``when_epoch`` refused on its row."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from whimbrel import (
    ActivityDefinition,
    DefinitionNotFound,
    InvalidInput,
    LauncherSpec,
    ScheduleConflict,
    ScheduleNotFound,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.contract.schedules import fire_request_id
from whimbrel.engine.leases import SweepLeases
from whimbrel.engine.schedules import Schedules
from whimbrel.testing import Crash, FaultInjector, RecordingLauncher, StepClock

#: The engine rules here run on the in-memory twin too (``pytest -m twin``).
TWIN = True

CLOCK = StepClock
LAMBDA = LauncherSpec("lambda", {"function": "f"})


@pytest.fixture
def tick(wb: Whimbrel, clock: StepClock) -> str:
    """A one-activity workflow whose runs stay RUNNING (the launcher starts nothing), and
    the clock set on a whole minute plus 10 s."""
    wb.register_workflow(WorkflowDefinition("tick", (ActivityDefinition("a", launcher=LAMBDA),)))
    clock.now = float(int(clock.now) // 60 * 60 + 10)
    return "tick"


def _runs(wb: Whimbrel, name: str = "tick") -> list[str]:
    return sorted(w.workflow_request_id or "" for w in wb.list_workflows(name=name,
                                                                        limit=500).items)


class EveryShard(SweepLeases):
    """Holds every shard without a lease: sweepers whose leases do not divide them (a
    lease taken over from a slow holder, clocks apart). ``fire`` alone must then keep one
    run per fire time."""

    def hold(self, shard: int | str) -> bool:
        return True


def _minute(clock: StepClock, k: int = 1) -> float:
    """The k-th whole minute after now."""
    return float((int(clock.now) // 60 + k) * 60)


def test_a_schedule_fires_once_per_fire_time_and_not_for_the_past(
        wb: Whimbrel, clock: StepClock, tick: str) -> None:
    info = wb.create_schedule("ticker", tick, every_seconds=60, overlap="allow",
                              input={"k": 1})
    assert info.status == "ACTIVE" and info.next_fire_epoch == _minute(clock)
    wb.sweep(clock())
    assert _runs(wb) == []  # created at :10, nothing due before the next minute
    fire = _minute(clock)
    clock.now = fire
    wb.sweep(clock())
    wb.sweep(clock())  # found again: nothing new
    assert _runs(wb) == [fire_request_id("ticker", fire)]
    run = wb.get_workflow(workflow_exec_id_for(fire_request_id("ticker", fire)))
    assert run.input == {"k": 1} and run.source == "schedule:ticker"
    assert fire_request_id("ticker", fire).endswith(
        datetime.fromtimestamp(fire, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    after = wb.get_schedule("ticker")
    assert after.last_fire_epoch == fire and after.next_fire_epoch == fire + 60
    assert after.last_run == run.workflow_exec_id


def test_four_concurrent_sweepers_start_one_run_per_fire_time(
        wb: Whimbrel, clock: StepClock, tick: str) -> None:
    wb.create_schedule("busy", tick, every_seconds=60, overlap="allow")
    feature = wb.engine.feature(Schedules)
    fires = []
    errors: list[BaseException] = []
    for _ in range(4):
        clock.now = _minute(clock)
        fires.append(clock.now)
        barrier = threading.Barrier(4)

        def sweeper(now: float = clock.now, barrier: threading.Barrier = barrier) -> None:
            try:
                barrier.wait()
                feature.sweep(now, EveryShard(wb.store, clock))
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=sweeper) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
    assert _runs(wb) == sorted(fire_request_id("busy", f) for f in fires)
    assert wb.get_schedule("busy").last_fire_epoch == fires[-1]


def test_missed_firings_follow_catchup_seconds(wb: Whimbrel, clock: StepClock,
                                               tick: str) -> None:
    wb.create_schedule("late", tick, every_seconds=60, overlap="allow", catchup_seconds=120)
    clock.now = _minute(clock, 10)  # the sweep was down for ten minutes
    wb.sweep(clock())
    now = clock.now
    assert _runs(wb) == sorted(fire_request_id("late", f) for f in (now - 120, now - 60, now))
    assert wb.get_schedule("late").next_fire_epoch == now + 60


def test_overlap_skip_drops_firings_while_the_previous_run_is_live(
        wb: Whimbrel, clock: StepClock, tick: str) -> None:
    wb.create_schedule("skipper", tick, every_seconds=60)  # overlap="skip" by default
    first = clock.now = _minute(clock)
    wb.sweep(clock())
    clock.now = _minute(clock)
    wb.sweep(clock())
    assert _runs(wb) == [fire_request_id("skipper", first)]
    assert wb.get_schedule("skipper").skipped == 1
    wb.cancel_workflow(workflow_exec_id_for(fire_request_id("skipper", first)))
    third = clock.now = _minute(clock)
    wb.sweep(clock())
    assert _runs(wb) == sorted([fire_request_id("skipper", first),
                                fire_request_id("skipper", third)])


def test_overlap_buffer_one_starts_one_waiting_firing_when_the_run_ends(
        wb: Whimbrel, clock: StepClock, tick: str) -> None:
    wb.create_schedule("buf", tick, every_seconds=60, overlap="buffer_one")
    fires = []
    for _ in range(3):
        clock.now = _minute(clock)
        fires.append(clock.now)
        wb.sweep(clock())
    info = wb.get_schedule("buf")
    assert _runs(wb) == [fire_request_id("buf", fires[0])]
    assert info.buffered_fire_epoch == fires[1] and info.skipped == 1  # one buffered
    assert info.next_fire_epoch is not None and info.next_fire_epoch <= clock.now
    wb.cancel_workflow(workflow_exec_id_for(fire_request_id("buf", fires[0])))
    clock.now += 5  # between fire times: the buffered firing starts at the next sweep
    wb.sweep(clock())
    assert _runs(wb) == sorted(fire_request_id("buf", f) for f in fires[:2])
    info = wb.get_schedule("buf")
    assert info.buffered_fire_epoch is None and info.next_fire_epoch == _minute(clock)


def test_pause_and_resume(wb: Whimbrel, clock: StepClock, tick: str) -> None:
    wb.create_schedule("p", tick, every_seconds=60, overlap="allow")
    assert wb.pause_schedule("p").status == "PAUSED"
    assert wb.pause_schedule("p").next_fire_epoch is None  # idempotent, out of the index
    clock.now = _minute(clock, 3)
    wb.sweep(clock())
    assert _runs(wb) == []
    resumed = wb.resume_schedule("p")
    assert resumed.status == "ACTIVE" and resumed.next_fire_epoch == clock.now + 60
    wb.sweep(clock())
    assert _runs(wb) == []  # the paused time is not fired for
    clock.now = _minute(clock)
    wb.sweep(clock())
    assert _runs(wb) == [fire_request_id("p", clock.now)]


def test_backfill_starts_past_firings_once(wb: Whimbrel, clock: StepClock, tick: str) -> None:
    wb.create_schedule("bf", tick, cron="*/5 * * * *", overlap="allow")
    end = float(int(clock.now) // 300 * 300)
    start = end - 900
    runs = wb.backfill_schedule("bf", start, end)
    assert len(runs) == 4
    assert wb.backfill_schedule("bf", start, end) == runs  # again: the same runs
    assert _runs(wb) == sorted(fire_request_id("bf", start + 300 * k) for k in range(4))
    with pytest.raises(InvalidInput, match="after now"):
        wb.backfill_schedule("bf", start, clock.now + 3600)
    with pytest.raises(ScheduleNotFound):
        wb.backfill_schedule("nope", start, end)


def test_bad_schedules_are_refused_and_change_nothing(wb: Whimbrel, tick: str) -> None:
    with pytest.raises(InvalidInput, match="never fires"):
        wb.create_schedule("feb30", tick, cron="0 0 30 2 *")
    with pytest.raises(InvalidInput, match="not a known IANA time zone"):
        wb.create_schedule("mars", tick, cron="0 2 * * *", timezone="Mars/Olympus")
    with pytest.raises(InvalidInput, match="not a valid cron"):
        wb.create_schedule("junk", tick, cron="61 * * * *")
    with pytest.raises(DefinitionNotFound):
        wb.create_schedule("ghost", "no_such_workflow", every_seconds=60)
    with pytest.raises(InvalidInput, match="fires no more"):
        wb.create_schedule("over", tick, every_seconds=60, start_at=1, end_at=100)
    assert wb.list_schedules() == []
    with pytest.raises(ScheduleNotFound):
        wb.pause_schedule("ghost")


def test_create_is_idempotent_and_refuses_another_spec(wb: Whimbrel, tick: str) -> None:
    first = wb.create_schedule("same", tick, cron="0 2 * * *", timezone="Europe/Berlin")
    assert wb.create_schedule("same", tick, cron="0 2 * * *",
                              timezone="Europe/Berlin") == first
    with pytest.raises(ScheduleConflict, match="another spec"):
        wb.create_schedule("same", tick, cron="0 3 * * *", timezone="Europe/Berlin")
    assert [i.schedule.cron for i in wb.list_schedules()] == ["0 2 * * *"]
    wb.delete_schedule("same")
    assert wb.list_schedules() == []
    with pytest.raises(ScheduleNotFound):
        wb.delete_schedule("same")


def test_a_schedule_past_its_end_ends_and_leaves_the_index(
        wb: Whimbrel, clock: StepClock, tick: str) -> None:
    last = _minute(clock, 2)
    wb.create_schedule("short", tick, every_seconds=60, overlap="allow", end_at=last)
    clock.now = last
    wb.sweep(clock())
    info = wb.get_schedule("short")
    assert info.status == "ENDED" and info.next_fire_epoch is None
    assert len(_runs(wb)) == 2
    schedules = wb.store.schedules
    assert "short" not in [sid for shard in schedules.schedule_shards
                           for sid in schedules.due_schedules(shard, clock.now + 10**6, 10)]


def test_a_request_row_dated_in_the_future_is_refused_on_its_row(
        wb: Whimbrel, clock: StepClock, tick: str) -> None:
    def record(rid: str, when: float) -> dict[str, object]:
        return {"eventName": "INSERT", "eventID": rid, "dynamodb": {"NewImage": {
            "workflow_request_id": {"S": rid}, "workflow_name": {"S": tick},
            "when_epoch": {"N": str(int(when))}}}}
    for rid, when in (("later", clock.now + 86400), ("now", clock.now)):
        client = wb.store.tables.client
        client.call("PutItem", {"TableName": wb.store.table_name("workflow_request"),
                                "Item": record(rid, when)["dynamodb"]["NewImage"]})  # type: ignore[index]
    assert wb.intake.workflow_request(record("later", clock.now + 86400)).outcome.value \
        == "REJECTED"
    row = wb.store.cold.get_request("later")
    assert row is not None and row.outcome == "REJECTED"
    assert "in the future" in (row.reason or "")
    assert wb.store.get_workflow(workflow_exec_id_for("later")) is None
    assert wb.intake.workflow_request(record("now", clock.now)).outcome.value == "STARTED"
    assert wb.get_workflow(workflow_exec_id_for("now")).state is WorkflowState.RUNNING


def test_a_sweep_reads_what_is_due_not_every_schedule(wb: Whimbrel, clock: StepClock,
                                                       tick: str) -> None:
    feature = wb.engine.feature(Schedules)
    wb.create_schedule("due", tick, every_seconds=60, overlap="allow")

    def sweep_cost() -> tuple[float, float]:
        clock.now = _minute(clock)
        meter = wb.store.meter
        reads, writes = meter.total_read_units, meter.total_write_units
        leases = SweepLeases(wb.store, clock)
        feature.sweep(clock(), leases)  # takes the due schedule's shard lease...
        leases.release()  # ...and gives it back, as a pass does at its end
        return meter.total_read_units - reads, meter.total_write_units - writes

    first = sweep_cost()
    for k in range(100):  # idle schedules: not due before tomorrow
        wb.create_schedule(f"idle{k}", tick, every_seconds=3600,
                           start_at=clock.now + 86400)
    # 4 index Queries + what the one due schedule costs (its firing, its shard's lease
    # taken and given back)
    assert sweep_cost() == first
    assert len(_runs(wb)) == 2


@pytest.mark.parametrize("phase", ["before", "after"])
def test_a_crash_at_any_write_of_a_firing_still_starts_one_run(
        wb: Whimbrel, clock: StepClock, tick: str, launched: RecordingLauncher,
        phase: str) -> None:
    feature = wb.engine.feature(Schedules)
    counter = FaultInjector()
    wb.create_schedule("count", tick, every_seconds=60, overlap="allow")
    clock.now = _minute(clock)
    wb.store.write_hooks.append(counter)
    feature.fire("count", clock.now)
    wb.store.write_hooks.remove(counter)
    assert counter.count >= 3  # the run's item, its activity row, the schedule's advance
    for k in range(1, counter.count + 1):
        sid = f"crash{k}"
        wb.create_schedule(sid, tick, every_seconds=60, overlap="allow")
        fire = clock.now = _minute(clock)
        injector = FaultInjector(at=k, phase=phase)
        wb.store.write_hooks.append(injector)
        with pytest.raises(Crash):
            feature.fire(sid, fire)
        wb.store.write_hooks.remove(injector)
        feature.fire(sid, fire)  # the next sweep (the crashed one's replay)
        wx = workflow_exec_id_for(fire_request_id(sid, fire))
        info = wb.get_schedule(sid)
        assert info.last_fire_epoch == fire and info.last_run == wx, injector.fired
        assert info.next_fire_epoch == fire + 60
        assert sum(1 for r in _runs(wb) if r.startswith(f"{sid}@")) == 1
        wb.sweep(clock.now + 130)  # the reconcile visit repairs a start cut short
        assert wb.get_workflow(wx).activity("a").state.value in ("QUEUED", "RUNNING"), \
            injector.fired
    assert launched.doubled() == []


def test_a_firing_that_cannot_start_is_recorded_and_the_schedule_goes_on(
        wb: Whimbrel, clock: StepClock, tick: str) -> None:
    publish = WorkflowDefinition("publish", (ActivityDefinition(
        "at", launcher=LauncherSpec.timer(until_input="publish_at")),))
    with pytest.raises(DefinitionNotFound):
        wb.create_schedule("pub", "publish", every_seconds=60)
    wb.register_workflow(publish)
    with pytest.raises(InvalidInput, match="publish_at"):  # refused at creation
        wb.create_schedule("pub", "publish", every_seconds=60)
    wb.create_schedule("later", tick, every_seconds=60, overlap="allow")
    # A newer version of the workflow refuses the schedule's input from now on.
    wb.register_workflow(WorkflowDefinition(tick, publish.activities))
    first = clock.now = _minute(clock)
    wb.sweep(clock())
    info = wb.get_schedule("later")
    assert _runs(wb) == [] and info.last_run is None
    assert info.last_error is not None and info.last_error.startswith(
        fire_request_id("later", first)) and "publish_at" in info.last_error
    assert info.next_fire_epoch == first + 60 and info.status == "ACTIVE"
    assert wb.list_schedules()[0].last_error == info.last_error
