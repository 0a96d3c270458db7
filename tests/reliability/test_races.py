"""Races (issue 5, part 3): many actors on the same items, in threads and in separate
processes. Every contested move has exactly one winner and the contract holds after."""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import pytest
import race_workers
from reliability_driver import LAMBDA, local_client

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    LauncherSpec,
    RetryPolicy,
    SignalRefused,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.errors import (
    ActivityStopped,
    NotAllowedNow,
    StateConflict,
    WhimbrelError,
)
from whimbrel.contract.ids import activity_exec_id, shard_of, workflow_exec_id_for
from whimbrel.contract.schedules import fire_request_id
from whimbrel.contract.states import Transition
from whimbrel.engine.children import Children
from whimbrel.engine.engine import IN_FLIGHT_GRACE_SECONDS
from whimbrel.engine.leases import SWEEP_LEASE_SECONDS, SweepLeases
from whimbrel.store import specs
from whimbrel.testing import RecordingLauncher, StepClock, assert_contract_holds

A, W, T = ActivityState, WorkflowState, Transition
THREADS = 6
ROUNDS = 5
EXT = LauncherSpec.external()

#: Contested moves run by this module, reported in docs/reliability.md.
RACES: Counter[str] = Counter()


@pytest.fixture
def rwb(ddb_endpoint: str, table_prefix: str, step_clock: StepClock,
        launcher: RecordingLauncher) -> Iterator[Whimbrel]:
    """DynamoDB Local only: these races need requests that really overlap in time; on the
    in-memory twin (one lock, no network) one thread's whole pass often ends before
    another's first write, which is a different interleaving, not a race."""
    client = local_client(ddb_endpoint, table_prefix, step_clock, launcher)
    yield client
    client.close()


@pytest.fixture(scope="module", autouse=True)
def _print_race_figures() -> Any:
    yield
    print("\nraces run:", dict(RACES), "total", sum(RACES.values()))


def together(*fns: Callable[[], Any]) -> list[Any]:
    """Run the callables at the same moment (a barrier), returning results or errors."""
    gate = threading.Barrier(len(fns))

    def run(fn: Callable[[], Any]) -> Any:
        gate.wait()
        try:
            return fn()
        except WhimbrelError as exc:
            return exc

    with ThreadPoolExecutor(len(fns)) as pool:
        return list(pool.map(run, fns))


def _one(name: str, *acts: ActivityDefinition) -> WorkflowDefinition:
    return WorkflowDefinition(name, acts)


def _checked(wb: Whimbrel, wx: str, defn: WorkflowDefinition,
             launcher: RecordingLauncher | None = None) -> Any:
    wf = wb.get_workflow(wx)
    launched = [r.activity_exec_id for r in (launcher.requests if launcher else [])
                if r.workflow_exec_id == wx]
    assert_contract_holds(wf, defn, launched=launched)
    return wf


def test_many_threads_claim_one_activity(rwb: Whimbrel) -> None:
    defn = _one("claim1", ActivityDefinition("A", launcher=EXT))
    rwb.register_workflow(defn)
    for _ in range(ROUNDS):
        wx = rwb.start_workflow("claim1")
        results = together(*[lambda: rwb.claim(workflow_name="claim1")] * THREADS)
        winners = [r for r in results if r is not None and not isinstance(r, Exception)]
        assert len(winners) == 1, results
        RACES["claim one activity (threads)"] += 1
        rwb.transition_activity(winners[0].activity_exec_id, T.COMPLETED)
        assert _checked(rwb, wx, defn).state is W.COMPLETED


def test_many_threads_complete_one_activity_dependents_launch_once(
        rwb: Whimbrel, launcher: RecordingLauncher) -> None:
    defn = _one("fan", ActivityDefinition("A", launcher=EXT),
                ActivityDefinition("B", ("A",), launcher=LAMBDA),
                ActivityDefinition("C", ("A",), launcher=LAMBDA))
    rwb.register_workflow(defn)
    for _ in range(ROUNDS):
        wx = rwb.start_workflow("fan")
        aeid = activity_exec_id(wx, "A", 1)
        rwb.transition_activity(aeid, T.RUNNING)
        results = together(*[lambda a=aeid: rwb.transition_activity(a, T.COMPLETED)] * THREADS)
        assert sum(not isinstance(r, Exception) for r in results) == 1, results
        assert all(isinstance(r, StateConflict) for r in results if isinstance(r, Exception))
        RACES["complete one activity (threads)"] += 1
        assert launcher.doubled() == []
        assert {r.activity_name for r in launcher.requests if r.workflow_exec_id == wx} == \
            {"B", "C"}
        _checked(rwb, wx, defn, launcher)


def test_complete_and_cancel_at_once(rwb: Whimbrel, step_clock: StepClock) -> None:
    defn = _one("cc", ActivityDefinition("A", launcher=EXT),
                ActivityDefinition("B", ("A",), launcher=EXT))
    rwb.register_workflow(defn)
    outcomes: Counter[str] = Counter()
    # Both contenders hold at their first activity_exec write until the other reached
    # its own: the report's COMPLETED and the cancel's stop of A meet at the store.
    meet = race_workers.WriteRendezvous(2, "activity_exec")
    for _ in range(ROUNDS):
        wx = rwb.start_workflow("cc")
        aeid = activity_exec_id(wx, "A", 1)
        rwb.transition_activity(aeid, T.RUNNING)
        meet.reset()
        rwb.store.write_hooks.append(meet)
        try:
            done, _ = together(lambda a=aeid: rwb.transition_activity(a, T.COMPLETED),
                               lambda w=wx: rwb.cancel_workflow(w))
        finally:
            rwb.store.write_hooks.remove(meet)
        assert meet.met == 2, "the race did not happen: a contender never reached its write"
        RACES["complete vs cancel (threads)"] += 1
        step_clock.advance(500)
        rwb.sweep()
        wf = _checked(rwb, wx, defn)
        # Cancel always wins the workflow (B had not started); A ended exactly once,
        # COMPLETED if its report came first, else CANCELLED (it was asked to stop).
        assert wf.state is W.CANCELLED, wf
        a = wf.activity("A")
        assert a.state in (A.COMPLETED, A.CANCELLED)
        assert [h.state for h in wf.history].count(W.CANCELLED.value) == 1
        outcomes[a.state.value] += 1
        if isinstance(done, Exception):
            pytest.fail(f"the activity's report was refused: {done!r}")
    print("complete vs cancel outcomes:", dict(outcomes))


def test_heartbeat_and_time_out_at_once(rwb: Whimbrel, step_clock: StepClock) -> None:
    defn = _one("hb", ActivityDefinition("A", launcher=EXT, heartbeat_timeout_seconds=10))
    rwb.register_workflow(defn)
    # The heartbeat's write and the sweep's time-out of the same row meet at the store.
    meet = race_workers.WriteRendezvous(2, "activity_exec")
    outcomes: Counter[str] = Counter()
    for _ in range(ROUNDS):
        wx = rwb.start_workflow("hb")
        aeid = activity_exec_id(wx, "A", 1)
        rwb.transition_activity(aeid, T.RUNNING)
        # A heartbeat row written in time (9 s in) is applied as the sweep times the
        # attempt out past its deadline and grace (issue 31: judged by its write time).
        written = step_clock.advance(9)
        step_clock.advance(2 + IN_FLIGHT_GRACE_SECONDS)
        meet.reset()
        rwb.store.write_hooks.append(meet)
        try:
            beat, report = together(
                lambda a=aeid, w=written:
                rwb.engine.heartbeats.heartbeat(a, written_epoch=w) and None,
                rwb.sweep)
        finally:
            rwb.store.write_hooks.remove(meet)
        assert meet.met == 2, "the race did not happen: a contender never reached its write"
        RACES["heartbeat vs time-out (threads)"] += 1
        timed_out = aeid in report.timed_out
        state = rwb.get_activity(aeid).state
        if timed_out:
            assert isinstance(beat, ActivityStopped) and state is A.TIMED_OUT, (beat, state)
        else:
            assert beat is None and state is A.RUNNING, (beat, report, state)
            rwb.transition_activity(aeid, T.COMPLETED)
        outcomes[state.value] += 1
        step_clock.advance(100)
        rwb.sweep()
        _checked(rwb, wx, defn)
    print("heartbeat vs time-out outcomes:", dict(outcomes))


def test_two_sweeps_at_once(rwb: Whimbrel, step_clock: StepClock,
                            launcher: RecordingLauncher) -> None:
    defn = _one("sw", ActivityDefinition(
        "A", launcher=LAMBDA, heartbeat_timeout_seconds=10,
        retry=RetryPolicy(max_attempts=3, initial_interval_seconds=20)))
    rwb.register_workflow(defn)
    wxs = [rwb.start_workflow("sw") for _ in range(ROUNDS)]
    for wx in wxs:
        rwb.transition_activity(activity_exec_id(wx, "A", 1), T.RUNNING)
    # First the time-outs (past the deadline and the in-flight grace), then the retries.
    for step in (11 + IN_FLIGHT_GRACE_SECONDS, 25):
        step_clock.advance(step)
        reports = together(rwb.sweep, rwb.sweep, rwb.sweep)
        RACES["three sweeps at once"] += 1
        timed = Counter(a for r in reports for a in r.timed_out)
        assert all(n == 1 for n in timed.values()), timed
        retried = Counter(a for r in reports for a in r.retries_launched)
        assert launcher.doubled() == [], (retried, launcher.counts())
    assert {r.activity_exec_id for r in launcher.requests} == \
        {activity_exec_id(wx, "A", n) for wx in wxs for n in (1, 2)}
    for wx in wxs:
        rwb.transition_activity(activity_exec_id(wx, "A", 2), T.RUNNING)
        rwb.transition_activity(activity_exec_id(wx, "A", 2), T.COMPLETED)
        assert _checked(rwb, wx, defn, launcher).state is W.COMPLETED


# -- waits (issue 13) ---------------------------------------------------------------------

SIGNAL_DEFN = _one("sig", ActivityDefinition("S", launcher=LauncherSpec.signal(
    "go", timeout_seconds=10)), ActivityDefinition("B", ("S",), launcher=EXT))


def test_two_decisions_at_once(rwb: Whimbrel) -> None:
    defn = _one("gate", ActivityDefinition("G", launcher=LauncherSpec.approval()),
                ActivityDefinition("B", ("G",), launcher=EXT))
    rwb.register_workflow(defn)
    outcomes: Counter[str] = Counter()
    for _ in range(ROUNDS):
        wx = rwb.start_workflow("gate")
        gate = activity_exec_id(wx, "G", 1)
        approved, rejected = together(lambda g=gate: rwb.approve(g, by="ann"),
                                      lambda g=gate: rwb.reject(g, by="bob", comment="no"))
        RACES["approve vs reject (threads)"] += 1
        results = [approved, rejected]
        assert sum(isinstance(r, StateConflict) for r in results) == 1, results
        state = rwb.get_activity(gate).state
        assert state is (A.FAILED if isinstance(approved, StateConflict) else A.COMPLETED)
        outcomes[state.value] += 1
        _checked(rwb, wx, defn)
    print("approve vs reject outcomes:", dict(outcomes))


def test_many_threads_send_the_same_signal(rwb: Whimbrel) -> None:
    rwb.register_workflow(SIGNAL_DEFN)
    for n in range(ROUNDS):
        wx = rwb.start_workflow("sig")
        results = together(*[lambda w=wx, i=n: rwb.signal(w, "go", {"i": i},
                                                           signal_id=f"tx-{i}")] * THREADS)
        RACES["one signal sent by many threads"] += 1
        assert [r for r in results if isinstance(r, Exception)] == []
        wf = _checked(rwb, wx, SIGNAL_DEFN)
        assert wf.activity("S").state is A.COMPLETED and wf.activity("S").output == {"i": n}
        assert [h.by for h in wf.activity("S").history].count(f"signal:tx-{n}") == 2


def test_different_signals_race_for_one_wait(rwb: Whimbrel) -> None:
    rwb.register_workflow(SIGNAL_DEFN)
    for _ in range(ROUNDS):
        wx = rwb.start_workflow("sig")
        results = together(*[lambda w=wx, i=i: rwb.signal(w, "go", i, signal_id=f"s{i}")
                             for i in range(THREADS)])
        RACES["different signals for one wait (threads)"] += 1
        wf = _checked(rwb, wx, SIGNAL_DEFN)
        received = [h.by for h in wf.activity("S").history if (h.by or "").startswith("s")]
        assert len(set(received)) == 1, received  # completed once, by one of them
        # The others are refused (nothing will wait for "go" again) or kept, never lost
        # into a second completion.
        assert all(r is None or isinstance(r, SignalRefused) for r in results), results


def test_signals_to_two_waits_of_one_name(rwb: Whimbrel) -> None:
    defn = _one("twice", ActivityDefinition("S1", launcher=LauncherSpec.signal("go")),
                ActivityDefinition("S2", launcher=LauncherSpec.signal("go")))
    rwb.register_workflow(defn)
    for _ in range(ROUNDS):
        wx = rwb.start_workflow("twice")
        ids = [f"x{i}" for i in range(THREADS)]
        # Every signal twice at once: a redelivery racing the first delivery.
        together(*[lambda w=wx, s=s: rwb.signal(w, "go", s, signal_id=s)
                   for s in ids + ids])
        RACES["signals for two waits of one name (threads)"] += 1
        wf = _checked(rwb, wx, defn)
        assert wf.state is W.COMPLETED
        outputs = [wf.activity("S1").output, wf.activity("S2").output]
        assert len(set(outputs)) == 2 and set(outputs) <= set(ids), outputs
        kept = {s.signal_id: s.consumed_by for s in rwb.store.signals.list_signals(wx)}
        bound = [s for s, holder in kept.items() if holder is not None]
        assert sorted(bound) == sorted(outputs)  # each wait holds the one it received


def test_signal_and_timeout_at_once(rwb: Whimbrel, step_clock: StepClock) -> None:
    rwb.register_workflow(SIGNAL_DEFN)
    outcomes: Counter[str] = Counter()
    # The signal's completion of the wait and the sweep's time-out of it meet at the store.
    meet = race_workers.WriteRendezvous(2, "activity_exec")
    for n in range(ROUNDS):
        wx = rwb.start_workflow("sig")
        step_clock.advance(11)
        meet.reset()
        rwb.store.write_hooks.append(meet)
        try:
            sent, report = together(
                lambda w=wx, i=n: rwb.signal(w, "go", i, signal_id=f"t{i}"),
                lambda: rwb.sweep(step_clock()))
        finally:
            rwb.store.write_hooks.remove(meet)
        assert meet.met == 2, "the race did not happen: a contender never reached its write"
        RACES["signal vs its timeout (threads)"] += 1
        state = rwb.get_workflow(wx).activity("S").state
        assert state in (A.COMPLETED, A.TIMED_OUT)
        if state is A.TIMED_OUT:
            assert activity_exec_id(wx, "S", 1) in report.timed_out
            assert isinstance(sent, SignalRefused) or sent is None, sent
        else:
            assert sent is None
        outcomes[state.value] += 1
        _checked(rwb, wx, SIGNAL_DEFN)
    print("signal vs timeout outcomes:", dict(outcomes))


def test_claim_suspend_and_resume_at_once(rwb: Whimbrel) -> None:
    defn = _one("pause", ActivityDefinition("A", launcher=EXT),
                ActivityDefinition("B", launcher=EXT))
    rwb.register_workflow(defn)
    for _ in range(ROUNDS):
        wx = rwb.start_workflow("pause")
        results = together(lambda: rwb.claim(workflow_name="pause"),
                           lambda w=wx: rwb.suspend_workflow(w),
                           lambda: rwb.claim(workflow_name="pause"))
        RACES["claims vs suspend (threads)"] += 1
        assert not [r for r in results if isinstance(r, Exception)], results
        assert rwb.claim(workflow_name="pause") is None  # suspended: nothing claimable
        claimed = [r for r in results if r is not None]
        together(lambda w=wx: rwb.resume_workflow(w), lambda w=wx: rwb.resume_workflow(w))
        while (got := rwb.claim(workflow_name="pause")) is not None:
            claimed.append(got)
        assert sorted(c.activity_name for c in claimed) == ["A", "B"]
        for c in claimed:
            rwb.transition_activity(c.activity_exec_id, T.COMPLETED)
        assert _checked(rwb, wx, defn).state is W.COMPLETED


# -- separate processes ------------------------------------------------------------------


def _spawn_pool(n: int) -> tuple[ProcessPoolExecutor, Any]:
    ctx = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(n, mp_context=ctx), ctx.Manager()


@pytest.mark.slow
def test_processes_claim_and_move_the_same_activities(ddb_endpoint: str,
                                                      table_prefix: str) -> None:
    procs = 3
    wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix)
    wb.create_tables()
    fan = [ActivityDefinition(f"R{i}", launcher=EXT) for i in range(5)]
    defn = WorkflowDefinition("procs", (*fan, ActivityDefinition(
        "Z", tuple(a.name for a in fan), launcher=EXT)))
    wb.register_workflow(defn)
    wxs = [wb.start_workflow("procs") for _ in range(4)]
    pool, manager = _spawn_pool(procs)
    with pool, manager:
        # 1. Workers in three processes drain the same workflows.
        barrier = manager.Barrier(procs)
        futures = [pool.submit(race_workers.claim_until_done, ddb_endpoint, table_prefix,
                               "procs", wxs, barrier, 60.0) for _ in range(procs)]
        claims = Counter(a for f in futures for a in f.result(timeout=120))
        assert all(n == 1 for n in claims.values()), claims
        assert len(claims) == len(wxs) * len(defn.activities)
        RACES["claim (processes)"] += len(claims)
        for wx in wxs:
            assert _checked(wb, wx, defn).state is W.COMPLETED
        # 2. Every process tries the same move on the same activity at the same moment.
        race_wxs = [wb.start_workflow("procs") for _ in range(ROUNDS)]
        aeids = [activity_exec_id(wx, "R0", 1) for wx in race_wxs]
        for verb in ("RUNNING", "COMPLETED"):
            barrier = manager.Barrier(procs)
            futures = [pool.submit(race_workers.move_once, ddb_endpoint, table_prefix, aeids,
                                   verb, barrier) for _ in range(procs)]
            per_process = [f.result(timeout=120) for f in futures]
            for i in range(len(aeids)):
                results = [p[i] for p in per_process]
                assert results.count("won") == 1, (verb, results)
                assert set(results) <= {"won", "StateConflict"}, results
            RACES[f"{verb} the same activity (processes)"] += len(aeids)
        for wx in race_wxs:
            wb.cancel_workflow(wx)
            assert _checked(wb, wx, defn).state is W.CANCELLED
    wb.close()


# -- issue 14: redrives, map items, child starts -------------------------------------------


def test_concurrent_redrives_one_takes_effect(rwb: Whimbrel, launcher: RecordingLauncher
                                               ) -> None:
    defn = _one("rdr", ActivityDefinition("A", launcher=EXT),
                ActivityDefinition("B", ("A",), launcher=LAMBDA))
    rwb.register_workflow(defn)
    for _ in range(ROUNDS):
        wx = rwb.start_workflow("rdr")
        aeid = activity_exec_id(wx, "A", 1)
        rwb.transition_activity(aeid, T.RUNNING)
        rwb.transition_activity(aeid, T.FAILED, error="boom")
        results = together(*[lambda w=wx: rwb.redrive_workflow(w)] * THREADS)
        assert sum(r is None for r in results) == 1, results
        assert all(isinstance(r, NotAllowedNow) for r in results if r is not None)
        RACES["redrive one run (threads)"] += 1
        wf = rwb.get_workflow(wx)
        assert wf.redrive_count == 1 and wf.latest_activities["A"].attempt == 2
        retry = activity_exec_id(wx, "A", 2)
        rwb.transition_activity(retry, T.RUNNING)
        rwb.transition_activity(retry, T.COMPLETED)
        b = activity_exec_id(wx, "B", 2)  # B was cancelled with the failed run
        rwb.transition_activity(b, T.RUNNING)
        rwb.transition_activity(b, T.COMPLETED)
        assert _checked(rwb, wx, defn, launcher).state is W.COMPLETED
    assert launcher.doubled() == []


def test_map_items_ending_at_once_end_the_map_once(rwb: Whimbrel,
                                                  launcher: RecordingLauncher) -> None:
    defn = _one("mapr", ActivityDefinition("M", launcher=EXT, map_over="$input.xs"),
                ActivityDefinition("Z", ("M",), launcher=LAMBDA))
    rwb.register_workflow(defn)
    for _ in range(ROUNDS):
        wx = rwb.start_workflow("mapr", {"xs": list(range(THREADS))})
        items = [activity_exec_id(wx, f"M#{i}", 1) for i in range(THREADS)]
        for aeid in items:
            rwb.transition_activity(aeid, T.RUNNING)
        results = together(*[lambda a=a: rwb.transition_activity(a, T.COMPLETED, output=a[-5:])
                             for a in items])
        assert not [r for r in results if isinstance(r, Exception)], results
        RACES["map items end together (threads)"] += 1
        wf = rwb.get_workflow(wx)
        node = wf.activity("M")
        assert [h.state for h in node.history].count("COMPLETED") == 1
        assert node.output == [a[-5:] for a in items]
        assert [r.activity_name for r in launcher.requests
                if r.workflow_exec_id == wx] == ["Z"]  # launched once
        rwb.transition_activity(activity_exec_id(wx, "Z", 1), T.RUNNING)
        rwb.transition_activity(activity_exec_id(wx, "Z", 1), T.COMPLETED)
        assert _checked(rwb, wx, defn, launcher).state is W.COMPLETED


def test_a_child_start_replayed_at_once_starts_one_child(rwb: Whimbrel) -> None:
    rwb.register_workflow(_one("kid", ActivityDefinition("K", launcher=EXT)))
    defn = _one("dad", ActivityDefinition("S", launcher=LauncherSpec.workflow("kid")))
    rwb.register_workflow(defn)
    for _ in range(ROUNDS):
        wx = rwb.start_workflow("dad")
        aeid = activity_exec_id(wx, "S", 1)
        results = together(*[lambda a=aeid: rwb.engine.feature(Children).start_child(a)] * THREADS)
        assert len({r for r in results if isinstance(r, str)}) == 1, results
        RACES["start one child (threads)"] += 1
        [child] = rwb.get_workflow(wx).child_workflow_exec_ids
        kid = rwb.get_workflow(child)
        assert [a.activity_name for a in kid.activities] == ["K"]
        claimed = rwb.claim(workflow_name="kid")
        assert claimed is not None
        rwb.transition_activity(claimed.activity_exec_id, T.COMPLETED, output={"k": 1})
        assert _checked(rwb, wx, defn).state is W.COMPLETED
        assert rwb.claim(workflow_name="kid") is None


# -- schedules (issue 22) -------------------------------------------------------------------

def test_sweepers_at_once_start_one_run_per_fire_time(rwb: Whimbrel, step_clock: StepClock,
                                                      launcher: RecordingLauncher) -> None:
    defn = _one("sched", ActivityDefinition("A", launcher=LAMBDA))
    rwb.register_workflow(defn)
    step_clock.now = float(int(step_clock.now) // 60 * 60 + 10)
    rwb.create_schedule("every", "sched", every_seconds=60, overlap="allow")
    rwb.create_schedule("once", "sched", every_seconds=60)  # skip while its run is live
    fires = []
    for _ in range(ROUNDS):
        step_clock.now = float((int(step_clock.now) // 60 + 1) * 60)
        fires.append(step_clock.now)
        together(*[rwb.sweep] * THREADS)
        RACES["sweepers on one due schedule"] += 1
        assert launcher.doubled() == []
    started = {r.workflow_exec_id for r in launcher.requests}
    assert started == {workflow_exec_id_for(fire_request_id("every", f)) for f in fires} | \
        {workflow_exec_id_for(fire_request_id("once", fires[0]))}
    assert rwb.get_schedule("once").skipped == ROUNDS - 1
    for wx in started:
        _checked(rwb, wx, defn, launcher)


# -- sweep leases (issue 19, item 4a) -------------------------------------------------------

def test_sweepers_race_for_one_shards_lease_one_sweeps_it(rwb: Whimbrel,
                                                          step_clock: StepClock) -> None:
    defn = _one("lease1", ActivityDefinition("A", launcher=EXT, heartbeat_timeout_seconds=10))
    rwb.register_workflow(defn)
    # Every sweeper's first lease write (the one shard with something due) meets the
    # others' at the store: DynamoDB gives the lease to one.
    meet = race_workers.WriteRendezvous(THREADS, "lease")
    for _ in range(ROUNDS):
        wx = rwb.start_workflow("lease1")
        aeid = activity_exec_id(wx, "A", 1)
        rwb.transition_activity(aeid, T.RUNNING)
        step_clock.advance(11 + IN_FLIGHT_GRACE_SECONDS)
        meet.reset()
        rwb.store.write_hooks.append(meet)
        try:
            reports = together(*[rwb.sweep] * THREADS)
        finally:
            rwb.store.write_hooks.remove(meet)
        assert meet.met == THREADS, "the race did not happen: a sweeper never took a lease"
        RACES["sweepers for one shard's lease (threads)"] += 1
        lease = specs.sweep_lease_id(int(shard_of(aeid, specs.TIMER_SHARDS)))
        holders = [r for r in reports if r.leases]
        assert len(holders) == 1 and holders[0].leases == [lease], reports
        assert holders[0].timed_out == [aeid]
        assert all(r.leased_elsewhere == [lease] and r.timed_out == [] for r in reports
                   if r is not holders[0])
        assert rwb.store.leases.get_lease(lease) is None  # given back at the end of its pass
        step_clock.advance(500)
        rwb.sweep()
        _checked(rwb, wx, defn)


def test_a_renewal_and_a_takeover_at_once_one_holds_the_lease(rwb: Whimbrel,
                                                             step_clock: StepClock) -> None:
    outcomes: Counter[str] = Counter()
    meet = race_workers.WriteRendezvous(2, "lease")
    for _ in range(ROUNDS):
        holder = SweepLeases(rwb.store, step_clock)
        assert holder.hold("7")
        lease = specs.sweep_lease_id(7)
        # Expired for the taker, renewed by its holder at the same moment.
        step_clock.advance(SWEEP_LEASE_SECONDS + 1)
        taker = SweepLeases(rwb.store, step_clock)
        meet.reset()
        rwb.store.write_hooks.append(meet)
        try:
            kept, took = together(lambda h=holder, x=lease: h.keep(x), lambda t=taker: t.hold("7"))
        finally:
            rwb.store.write_hooks.remove(meet)
        assert meet.met == 2, "the race did not happen"
        RACES["lease renewal vs takeover (threads)"] += 1
        assert kept != took, (kept, took)  # exactly one holds it
        now = rwb.store.leases.get_lease(lease)
        assert now is not None and now.owner == (holder if kept else taker).owner
        outcomes["renewed" if kept else "taken over"] += 1
        (holder if kept else taker).release()
        assert rwb.store.leases.get_lease(lease) is None
    print("renewal vs takeover outcomes:", dict(outcomes))


# -- issue 22: one free slot ------------------------------------------------------------------


def _holders(rwb: Whimbrel, pool: str, slots: int) -> list[str]:
    return [s.holder for s in rwb.store.pools.held_slots(pool, slots) if s.holder]


def test_many_starts_race_for_one_free_slot(rwb: Whimbrel, launcher: RecordingLauncher
                                            ) -> None:
    rwb.set_pool("one", slots=1, per_second=None)
    defn = _one("slot1", ActivityDefinition("A", launcher=LAMBDA, pool="one"))
    rwb.register_workflow(defn)
    # Every starter holds at its first pool write (its take of slot 0) until all are
    # there: THREADS conditional writes on one free slot at the same moment.
    meet = race_workers.WriteRendezvous(THREADS, "pool")
    for _ in range(ROUNDS):
        meet.reset()
        rwb.store.write_hooks.append(meet)
        try:
            wxs = together(*[lambda: rwb.start_workflow("slot1")] * THREADS)
        finally:
            rwb.store.write_hooks.remove(meet)
        assert meet.met == THREADS, "the race did not happen"
        RACES["start into one free slot (threads)"] += 1
        assert all(isinstance(wx, str) for wx in wxs), wxs
        states = Counter(rwb.get_workflow(wx).activity("A").state for wx in wxs)
        assert states == {A.QUEUED: 1, A.READY: THREADS - 1}, states
        held = _holders(rwb, "one", 1)
        assert len(held) == 1 and held[0].startswith(tuple(wxs))
        for _ in wxs:  # each end admits the next: every run launched once
            [req] = [r for r in launcher.take()]
            rwb.transition_activity(req.activity_exec_id, T.RUNNING)
            rwb.transition_activity(req.activity_exec_id, T.COMPLETED)
        assert launcher.take() == [] and launcher.doubled() == []
        for wx in wxs:
            assert _checked(rwb, wx, defn, launcher).state is W.COMPLETED
        assert _holders(rwb, "one", 1) == [] and rwb.get_pool("one").waiting == 0


def test_a_release_and_a_newcomer_race_for_the_slot(rwb: Whimbrel,
                                                    launcher: RecordingLauncher) -> None:
    rwb.set_pool("one", slots=1, per_second=None)
    defn = _one("slot2", ActivityDefinition("A", launcher=LAMBDA, pool="one"))
    rwb.register_workflow(defn)
    meet = race_workers.WriteRendezvous(2, "pool")
    outcomes: Counter[str] = Counter()
    for _ in range(ROUNDS):
        holder, waiter = rwb.start_workflow("slot2"), rwb.start_workflow("slot2")
        [req] = launcher.take()
        rwb.transition_activity(req.activity_exec_id, T.RUNNING)
        meet.reset()
        rwb.store.write_hooks.append(meet)
        try:
            _, newcomer = together(
                lambda a=req.activity_exec_id: rwb.transition_activity(a, T.COMPLETED),
                lambda: rwb.start_workflow("slot2"))
        finally:
            rwb.store.write_hooks.remove(meet)
        assert meet.met == 2, "the race did not happen"
        RACES["release vs newcomer for one slot (threads)"] += 1
        assert isinstance(newcomer, str), newcomer
        queued = [wx for wx in (waiter, newcomer)
                  if rwb.get_workflow(wx).activity("A").state is A.QUEUED]
        assert len(queued) == 1, queued  # one of them took it, never both
        outcomes["waiter" if queued == [waiter] else "newcomer"] += 1
        assert _holders(rwb, "one", 1) == [activity_exec_id(queued[0], "A", 1)]
        for _ in range(2):
            [nxt] = launcher.take()
            rwb.transition_activity(nxt.activity_exec_id, T.RUNNING)
            rwb.transition_activity(nxt.activity_exec_id, T.COMPLETED)
        for wx in (holder, waiter, newcomer):
            assert _checked(rwb, wx, defn, launcher).state is W.COMPLETED
        assert _holders(rwb, "one", 1) == []
    print("release vs newcomer:", dict(outcomes))


@pytest.mark.slow
def test_processes_start_and_claim_through_a_pool_of_two(ddb_endpoint: str,
                                                         table_prefix: str) -> None:
    procs = 3
    wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix)
    wb.create_tables()
    wb.set_pool("two", slots=2, per_second=None)
    defn = _one("pool2", ActivityDefinition("A", launcher=EXT, pool="two"))
    wb.register_workflow(defn)
    pool, manager = _spawn_pool(procs)
    with pool, manager:
        barrier = manager.Barrier(procs)
        started = [pool.submit(race_workers.start_runs, ddb_endpoint, table_prefix, "pool2",
                               4, barrier) for _ in range(procs)]
        wxs = [wx for f in started for wx in f.result(timeout=120)]
        assert len(_holders(wb, "two", 2)) == 2
        barrier = manager.Barrier(procs)
        futures = [pool.submit(race_workers.claim_until_done, ddb_endpoint, table_prefix,
                               "pool2", wxs, barrier, 60.0) for _ in range(procs)]
        claims = Counter(a for f in futures for a in f.result(timeout=120))
    assert all(n == 1 for n in claims.values()) and len(claims) == len(wxs), claims
    RACES["start and claim through a pool (processes)"] += len(claims)
    spans = []
    for wx in wxs:
        act = _checked(wb, wx, defn).activity("A")
        at = {h.state: h.at for h in act.history}
        spans.append((at["RUNNING"], at["COMPLETED"]))
    # Running spans (inside the held ones: claimable → end) never overlap three deep.
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most <= 2, spans
    assert _holders(wb, "two", 2) == [] and wb.get_pool("two").waiting == 0
    wb.close()


def test_a_late_report_and_the_slot_check_race_for_a_timed_out_holders_slot(
        rwb: Whimbrel, step_clock: StepClock) -> None:
    """Issue 31: a timed-out attempt keeps its slot until its code stops or shows no
    sign of life. Its late report and the sweep's check of the slot give it back at the
    same moment: one of them does, and the waiter is admitted once."""
    rwb.set_pool("kept", slots=1, per_second=None)
    defn = _one("kept1", ActivityDefinition("A", launcher=EXT, pool="kept",
                                            start_to_close_seconds=10))
    rwb.register_workflow(defn)
    meet = race_workers.WriteRendezvous(2, "pool")
    for _ in range(ROUNDS):
        first, second = rwb.start_workflow("kept1"), rwb.start_workflow("kept1")
        claimed = rwb.claim(workflow_name="kept1")
        assert claimed is not None and claimed.workflow_exec_id == first
        step_clock.advance(16)
        rwb.sweep()
        assert rwb.get_workflow(first).activity("A").state is A.TIMED_OUT
        assert _holders(rwb, "kept", 1) == [claimed.activity_exec_id]  # kept
        step_clock.advance(10)  # past close + 10 s: the sweep takes it for dead
        meet.reset()
        rwb.store.write_hooks.append(meet)
        try:
            together(lambda a=claimed.activity_exec_id: rwb.transition_activity(
                a, T.COMPLETED, output={"late": 1}), rwb.sweep)
        finally:
            rwb.store.write_hooks.remove(meet)
        assert meet.met == 2, "the race did not happen"
        RACES["late report vs slot check of a timed-out holder (threads)"] += 1
        held = _holders(rwb, "kept", 1)
        assert held == [activity_exec_id(second, "A", 1)], held  # the waiter, once
        nxt = rwb.claim(workflow_name="kept1")
        assert nxt is not None and nxt.workflow_exec_id == second
        assert rwb.claim(workflow_name="kept1") is None
        rwb.transition_activity(nxt.activity_exec_id, T.COMPLETED)
        assert _checked(rwb, second, defn).state is W.COMPLETED
        assert _holders(rwb, "kept", 1) == [] and rwb.get_pool("kept").waiting == 0


def test_holders_of_a_lowered_pool_ending_at_once_admit_one(
        rwb: Whimbrel, launcher: RecordingLauncher) -> None:
    """Issue 31: a pool lowered from 3 slots to 1 while 3 hold it; the 3 end at the same
    moment: exactly one waiter goes (by the release that landed last), never more."""
    defn = _one("lowered3", ActivityDefinition("A", launcher=LAMBDA, pool="low"))
    meet = race_workers.WriteRendezvous(3, "pool")
    rwb.set_pool("low", slots=3, per_second=None)
    rwb.register_workflow(defn)
    for _ in range(ROUNDS):
        rwb.set_pool("low", slots=3, per_second=None)
        wxs = [rwb.start_workflow("lowered3") for _ in range(6)]
        holders = [r.activity_exec_id for r in launcher.take()]
        assert len(holders) == 3
        for aeid in holders:
            rwb.transition_activity(aeid, T.RUNNING)
        rwb.set_pool("low", slots=1, per_second=None)
        meet.reset()
        rwb.store.write_hooks.append(meet)
        try:
            together(*[lambda a=aeid: rwb.transition_activity(a, T.COMPLETED)
                       for aeid in holders])
        finally:
            rwb.store.write_hooks.remove(meet)
        assert meet.met == 3, "the race did not happen"
        RACES["lowered pool: holders end at once (threads)"] += 1
        admitted = launcher.take()
        assert len(admitted) == 1 and len(_holders(rwb, "low", 3)) == 1, admitted
        for _ in range(2):  # then one at a time
            [req] = admitted
            rwb.transition_activity(req.activity_exec_id, T.RUNNING)
            assert len(_holders(rwb, "low", 3)) == 1
            rwb.transition_activity(req.activity_exec_id, T.COMPLETED)
            admitted = launcher.take()
        [req] = admitted
        rwb.transition_activity(req.activity_exec_id, T.RUNNING)
        rwb.transition_activity(req.activity_exec_id, T.COMPLETED)
        assert launcher.take() == [] and launcher.doubled() == []
        for wx in wxs:
            assert _checked(rwb, wx, defn, launcher).state is W.COMPLETED
        assert _holders(rwb, "low", 3) == [] and rwb.get_pool("low").waiting == 0


# -- issue 31: concurrent early ends -------------------------------------------------------

def _early(wb: Whimbrel, name: str, n: int) -> tuple[WorkflowDefinition, str, list[str]]:
    defn = _one(name, *(ActivityDefinition(f"E{i}", launcher=EXT) for i in range(n)),
                ActivityDefinition("after", tuple(f"E{i}" for i in range(n)), launcher=EXT))
    wb.register_workflow(defn) if not wb.list_definitions(name) else None
    wx = wb.start_workflow(name)
    aeids = [activity_exec_id(wx, f"E{i}", 1) for i in range(n)]
    for aeid in aeids:
        wb.transition_activity(aeid, T.RUNNING)
    return defn, wx, aeids


def _one_ender(wb: Whimbrel, wx: str, defn: WorkflowDefinition, aeids: list[str],
               won: list[bool]) -> str:
    """Exactly one ended the run (its output is the run's); the others' reports were
    plain ends of their attempts (COMPLETED, or CANCELLED once the end asked them to
    stop), none of them marked as ending it."""
    assert won.count(True) == 1, won
    winner = aeids[won.index(True)]
    wf = _checked(wb, wx, defn)
    assert wf.state is W.COMPLETED and wf.ended_by == winner, wf
    assert wf.output == {"by": winner}
    assert wf.activity("after").state is A.SKIPPED
    enders = [a for a in wb.store.list_activities(wx) if a.ends_workflow]
    assert [a.activity_exec_id for a in enders] == [winner]
    for aeid in aeids:
        if aeid != winner:
            assert wb.get_activity(aeid).state in (A.COMPLETED, A.CANCELLED)
    return winner


def test_concurrent_end_workflow_calls_have_one_winner(rwb: Whimbrel) -> None:
    """Every attempt of a run ends it early at the same moment: one wins; the others'
    reports are plain ends of their attempts (all used to be told they had won)."""
    from whimbrel.engine.conditions import Conditions

    meet = race_workers.WriteRendezvous(3, "workflow_exec")
    for _ in range(ROUNDS):
        defn, wx, aeids = _early(rwb, "early3", 3)
        meet.reset()
        rwb.store.write_hooks.append(meet)
        try:
            results = together(*[lambda a=a: rwb.engine.feature(Conditions).end_early(a, {"by": a})
                                 for a in aeids])
        finally:
            rwb.store.write_hooks.remove(meet)
        assert meet.met == 3, "the three claims did not meet at the store"
        assert not [r for r in results if isinstance(r, Exception)], results
        _one_ender(rwb, wx, defn, aeids, [bool(r.ends_workflow) for r in results])
        RACES["end_workflow of one run at once"] += 1


@pytest.mark.slow
def test_processes_end_one_run_early_at_once(ddb_endpoint: str, table_prefix: str) -> None:
    procs = 3
    wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix)
    wb.create_tables()
    runs = [_early(wb, "early_p", procs) for _ in range(ROUNDS)]
    pool, manager = _spawn_pool(procs)
    with pool, manager:
        barrier = manager.Barrier(procs)
        futures = [pool.submit(race_workers.end_early_once, ddb_endpoint, table_prefix,
                               [aeids[p] for _, _, aeids in runs], barrier)
                   for p in range(procs)]
        per_process = [f.result(timeout=120) for f in futures]
    for i, (defn, wx, aeids) in enumerate(runs):
        results = [per_process[p][i] for p in range(procs)]
        assert set(results) <= {"won", "lost"}, results
        _one_ender(wb, wx, defn, aeids, [r == "won" for r in results])
        RACES["end_workflow of one run at once (processes)"] += 1
    wb.close()
