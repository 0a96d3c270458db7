"""Sweepers that divide the work (issue 19, item 4a), on DynamoDB Local: each shard of the
sweep's sparse indexes is swept by the holder of its lease; one sweeper alone covers
every shard in one pass; several at once never sweep a shard together; a killed
sweeper's shards are taken over once its lease expires (the clock injected)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityState as A
from whimbrel import Whimbrel, WorkflowDefinition
from whimbrel.contract.errors import StoreError
from whimbrel.contract.ids import shard_of
from whimbrel.engine.leases import SWEEP_LEASE_SECONDS, SweepLeases
from whimbrel.engine.sweep import SweepReport, sweep
from whimbrel.store import specs
from whimbrel.testing import StepClock

CLOCK = StepClock
ROOT = Path(__file__).resolve().parents[2]


def _silent(wb: Whimbrel, clock: StepClock, n: int) -> list[str]:
    """``n`` claimed attempts (heartbeat timeout 10 s), each in a run of its own,
    all past their deadline and the in-flight grace: due in the timers index."""
    wb.register_workflow(WorkflowDefinition("lease", (Act("work", heartbeat_timeout_seconds=10),)))
    for _ in range(n):
        wb.start_workflow("lease")
    ids = []
    while (act := wb.claim(workflow_name="lease")) is not None:
        ids.append(act.activity_exec_id)
    assert len(ids) == n
    clock.advance(11 + wb.engine.in_flight_grace_seconds)
    return ids


def _leases_of(ids: list[str]) -> set[str]:
    return {specs.sweep_lease_id(int(shard_of(a, specs.TIMER_SHARDS))) for a in ids}


def test_one_sweeper_covers_every_shard_in_one_pass(wb: Whimbrel, clock: StepClock) -> None:
    ids = _silent(wb, clock, 60)
    busy = _leases_of(ids)
    assert len(busy) > specs.SWEEP_LEASES // 2  # spread over most shards
    report = wb.sweep(clock())
    assert sorted(report.timed_out) == sorted(ids)
    assert sorted(report.leases) == sorted(busy) and report.leased_elsewhere == []
    # Every lease given back at the end of the pass.
    assert all(wb.store.leases.get_lease(lease) is None for lease in busy)
    assert all(wb.get_activity(a).state is A.TIMED_OUT for a in ids)


class _Together(SweepLeases):
    """Sweep leases whose pass waits at its end until every sweeper has swept: the
    passes overlap in time, so a shard one of them swept is held all along."""

    def __init__(self, wb: Whimbrel, gate: threading.Barrier) -> None:
        super().__init__(wb.store, wb.clock)
        self.gate = gate

    def release(self) -> None:
        self.gate.wait()
        super().release()


def test_sweepers_at_once_divide_the_shards(wb: Whimbrel, clock: StepClock) -> None:
    ids = _silent(wb, clock, 96)
    sweepers = 4
    start, end = threading.Barrier(sweepers, timeout=60), threading.Barrier(sweepers, timeout=60)
    reports: list[SweepReport] = []
    errors: list[BaseException] = []

    def one() -> None:
        leases = _Together(wb, end)
        try:
            start.wait()
            reports.append(sweep(wb.engine, clock(), leases=leases))
        except BaseException as exc:  # surfaced below
            errors.append(exc)
            end.abort()

    threads = [threading.Thread(target=one) for _ in range(sweepers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == [] and len(reports) == sweepers
    # Each shard swept by one sweeper: the lease sets of passes that overlapped are
    # disjoint, and together they cover every shard with something due...
    taken = Counter(lease for r in reports for lease in r.leases)
    assert set(taken) == _leases_of(ids) and set(taken.values()) == {1}, taken
    # ...so every attempt was read and timed out by exactly one of them.
    timed = Counter(a for r in reports for a in r.timed_out)
    assert set(timed) == set(ids) and set(timed.values()) == {1}
    assert sum(len(r.errors) for r in reports) == 0
    # The work was divided: more than one sweeper swept, and a lease taken by one was
    # left by another that wanted it.
    assert sum(1 for r in reports if r.leases) >= 2, [r.leases for r in reports]
    assert any(r.leased_elsewhere for r in reports)


KILLED = textwrap.dedent("""
    import os, sys
    from whimbrel import Whimbrel

    endpoint, prefix, now = sys.argv[1], sys.argv[2], float(sys.argv[3])
    wb = Whimbrel(endpoint_url=endpoint, table_prefix=prefix, clock=lambda: now)

    def die(phase, operation, table):
        # Killed after it took its first lease, before its first move: no goodbye.
        if phase == "before" and table == "activity_exec":
            os._exit(9)
    wb.store.write_hooks.append(die)
    wb.sweep(now)
    sys.exit(0)  # not reached: a sweep with due work writes to activity_exec
""")


def test_a_killed_sweepers_shard_is_taken_over_after_its_lease_expires(
        wb: Whimbrel, clock: StepClock, ddb_endpoint: str, table_prefix: str) -> None:
    ids = _silent(wb, clock, 12)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")])}
    killed = subprocess.run([sys.executable, "-c", KILLED, ddb_endpoint, table_prefix,
                             repr(clock())], env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert killed.returncode == 9, killed.stderr
    held = [lease for lease in _leases_of(ids) if wb.store.leases.get_lease(lease) is not None]
    assert len(held) == 1  # the shard it was sweeping when it died
    holder = wb.store.leases.get_lease(held[0])
    assert holder is not None and holder.pid is not None and holder.pid != os.getpid()
    mine = [a for a in ids if specs.sweep_lease_id(int(shard_of(a, specs.TIMER_SHARDS)))
            == held[0]]
    # Until the lease expires the dead sweeper's shard is left alone...
    report = wb.sweep(clock())
    assert report.leased_elsewhere == held
    assert sorted(report.timed_out) == sorted(set(ids) - set(mine))
    assert all(wb.get_activity(a).state is A.RUNNING for a in mine)
    # ...and once it has, the next sweep takes it over.
    clock.advance(SWEEP_LEASE_SECONDS + 1)
    report = wb.sweep(clock())
    assert held[0] in report.leases and report.leased_elsewhere == []
    assert sorted(report.timed_out) == sorted(mine)
    assert wb.store.leases.get_lease(held[0]) is None


def test_a_sweeper_that_stalls_past_its_lease_leaves_the_shard_to_the_next(
        wb: Whimbrel, clock: StepClock) -> None:
    ids = _silent(wb, clock, 40)
    first = SweepLeases(wb.store, clock)
    shard = shard_of(ids[0], specs.TIMER_SHARDS)
    lease_id = specs.sweep_lease_id(int(shard))
    assert first.hold(shard)
    # It stalls (a long GC pause, a frozen VM) past its lease; another sweeper takes over
    # and sweeps the shard, and a third holds it now.
    clock.advance(SWEEP_LEASE_SECONDS + 1)
    second = wb.sweep(clock())
    assert lease_id in second.leases and sorted(second.timed_out) == sorted(ids)
    third = SweepLeases(wb.store, clock)
    assert third.hold(shard)
    # Back, the first finds its lease gone before it touches another item...
    assert first.keep(lease_id) is False and first.lost == [lease_id]
    assert first.hold(shard) is False
    # ...and giving back what it thought it held never frees another's lease.
    assert wb.store.leases.release_lease(lease_id, first.owner) is False
    held = wb.store.leases.get_lease(lease_id)
    assert held is not None and held.owner == third.owner
    third.release()
    assert wb.store.leases.get_lease(lease_id) is None


def test_a_long_pass_renews_its_leases(wb: Whimbrel, clock: StepClock) -> None:
    leases = SweepLeases(wb.store, clock)
    assert leases.hold("3") and leases.hold("35")  # one lease: shard 3 and 35 % 32
    lease_id = specs.sweep_lease_id(3)
    before = wb.store.leases.get_lease(lease_id)
    assert before is not None and leases.taken == [lease_id]
    clock.advance(SWEEP_LEASE_SECONDS / 2 - 1)
    leases.keep_all()  # more than half left: no write
    assert wb.store.leases.get_lease(lease_id) == before
    clock.advance(2)
    leases.keep_all()  # less than half left: renewed
    after = wb.store.leases.get_lease(lease_id)
    assert after is not None and after.until_epoch == clock() + SWEEP_LEASE_SECONDS
    assert after.acquired_epoch == before.acquired_epoch
    # Renewed, nobody else can take it, even past its first expiry.
    clock.advance(SWEEP_LEASE_SECONDS / 2 + 5)
    assert SweepLeases(wb.store, clock).hold("3") is False
    leases.release()


def test_a_lease_throttled_past_the_stores_tries_leaves_its_shard_to_the_next_pass(
        wb: Whimbrel, clock: StepClock) -> None:
    ids = _silent(wb, clock, 6)
    refused: list[str] = []

    def throttled(phase: str, operation: str, table: str) -> None:
        # What the store raises once DynamoDB kept throttling a write past its tries.
        if phase == "before" and table == "lease" and operation == "PutItem" and not refused:
            refused.append(operation)
            raise StoreError("PutItem: ProvisionedThroughputExceededException: throttled",
                             aws_code="ProvisionedThroughputExceededException", retryable=True)

    wb.store.write_hooks.append(throttled)
    try:
        first = wb.sweep(clock())
    finally:
        wb.store.write_hooks.remove(throttled)
    # The pass went on with every other shard and says which lease it could not take.
    assert len(first.errors) == 1 and first.errors[0].startswith("sweep#")
    assert "ProvisionedThroughputExceededException" in first.errors[0]
    skipped = first.errors[0].partition(":")[0]
    assert skipped not in first.leases
    left = [a for a in ids if specs.sweep_lease_id(int(shard_of(a, specs.TIMER_SHARDS)))
            == skipped]
    assert left and sorted(first.timed_out) == sorted(set(ids) - set(left))
    # The next pass sweeps it.
    second = wb.sweep(clock())
    assert second.errors == [] and sorted(second.timed_out) == sorted(left)
