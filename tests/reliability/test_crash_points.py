"""Crash at every write (issue 5, part 1).

For each plan (start, complete with dependents and fan-in, external claim, retry,
time-out, fail with cascade, cancel), a clean run counts the DynamoDB writes; then for
every k and for both sides of the k-th write ("before": it never landed, "after": it
landed and the process died) the same plan runs again with a crash there, followed by
sweeps and the rest of the world carrying on. Every run must end in the plan's
terminal state with the contract intact and no attempt launched twice.
"""

from __future__ import annotations

import os
import uuid

import pytest
from reliability_driver import Plan, plans, run_plan

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.contract.ids import activity_exec_id
from whimbrel.contract.pools import run_pool
from whimbrel.engine.engine import RECONCILE_GRACE_SECONDS
from whimbrel.engine.leases import SWEEP_LEASE_SECONDS
from whimbrel.engine.pools import IN_FLIGHT_SECONDS
from whimbrel.store import specs
from whimbrel.testing import (
    Crash,
    FaultInjector,
    RecordingLauncher,
    StepClock,
    assert_contract_holds,
)

#: WHIMBREL_RELIABILITY_FULL=1 crashes on both sides of every write. By default every
#: write is crashed "after" and every third "before": between two writes the engine only
#: reads, so "before write k" leaves the tables as "after write k-1" did; the two differ
#: only by a launch made in between, which the sampled "before" points still exercise.
FULL = os.environ.get("WHIMBREL_RELIABILITY_FULL") == "1"

FIGURES: dict[str, int] = {}


def _check(wb: Whimbrel, launcher: RecordingLauncher, plan: Plan, wx: str, why: str,
           clock: StepClock) -> None:
    _slots_given_back(wb, plan, clock, why)
    wf = wb.get_workflow(wx)
    assert wf.state is plan.expected, f"{plan.name} {why}: ended {wf.state.value}: {wf}"
    defs = {d.name: d for d in (plan.definition, *plan.children)}
    for run in (wf, *(wb.get_workflow(c) for c in wf.child_workflow_exec_ids)):
        run_id = run.workflow_exec_id
        assert_contract_holds(run, defs[run.workflow_name],
                              launched=[r.activity_exec_id for r in launcher.requests
                                        if r.workflow_exec_id == run_id])
        # A finished run leaves every sparse index: nothing for a later sweep to visit.
        raw = wb.store.get_workflow(run_id)
        assert raw is not None and raw.check_epoch is None, \
            f"{plan.name} {why}: reconcile armed on {run_id}"
        for item in wb.store.list_activities(run_id):
            assert item.timer_epoch is None and item.claim_key is None \
                and item.held_epoch is None, \
                f"{plan.name} {why}: {item.activity_exec_id} still indexed"
        # Issue 31: one early end at most, and a run ended early names it.
        enders = [i.activity_exec_id for i in wb.store.list_activities(run_id)
                  if i.ends_workflow]
        assert len(enders) <= 1 and (raw.ended_by is None or enders == [raw.ended_by]), \
            f"{plan.name} {why}: enders {enders}, ended by {raw.ended_by}"
        if plan.children and run is wf:
            assert len(wf.child_workflow_exec_ids) == 1, wf  # one child, however replayed


def _slots_given_back(wb: Whimbrel, plan: Plan, clock: StepClock, why: str) -> None:
    """Issue 22: once the run ended (and the sweep had its look at held slots) no slot
    of its pools is held and nothing waits: none leaked, none counted twice."""
    pools = [name for name, _ in plan.pools] + list(plan.keyed)
    if plan.definition.max_running:
        pools.append(run_pool(plan.definition.name))
    if not pools:
        return
    clock.advance(IN_FLIGHT_SECONDS + 1)
    wb.sweep(clock())
    for pool in pools:
        assert wb.store.pools.held_slots(pool, 4) == [], f"{plan.name} {why}: {pool} slot leaked"
        assert wb.store.pools.waiter_heads(pool) == [], f"{plan.name} {why}: {pool} waiter left"


@pytest.mark.slow
@pytest.mark.parametrize("plan", plans(), ids=lambda p: p.name)
def test_crash_at_every_write(rwb: Whimbrel, step_clock: StepClock,
                              launcher: RecordingLauncher, plan: Plan) -> None:
    for pool, slots in plan.pools:
        rwb.set_pool(pool, slots=slots, per_second=None)
    for child in plan.children:
        rwb.register_workflow(child)
    rwb.register_workflow(plan.definition)
    counter = FaultInjector()
    rwb.store.write_hooks.append(counter)
    clean = run_plan(rwb, step_clock, launcher, plan, f"clean-{uuid.uuid4()}")
    rwb.store.write_hooks.remove(counter)
    _check(rwb, launcher, plan, clean.workflow_exec_id, "without a crash", step_clock)
    writes = counter.count
    assert writes > 5

    tried = 0
    for k in range(1, writes + 1):
        for phase in ("before", "after"):
            if phase == "before" and not FULL and k % 3 != 1:
                continue
            injector = FaultInjector(at=k, phase=phase)
            rwb.store.write_hooks.append(injector)
            try:
                out = run_plan(rwb, step_clock, launcher, plan, f"{plan.name}-{k}-{phase}")
            finally:
                rwb.store.write_hooks.remove(injector)
            if injector.fired is None:
                continue  # this path had fewer writes; still checked below
            tried += 1
            _check(rwb, launcher, plan, out.workflow_exec_id,
                   f"crash {phase} write #{k} {injector.fired}\n" + "\n".join(out.log),
                   step_clock)
    assert launcher.doubled() == []
    FIGURES[plan.name] = tried
    print(f"\n{plan.name}: {writes} writes in a clean run, {tried} crash points tried")


def test_a_sweep_that_dies_at_any_write_leaves_its_shards_to_the_next(
        rwb: Whimbrel, step_clock: StepClock, launcher: RecordingLauncher) -> None:
    """Sweep leases (issue 19, item 4a): a pass that dies at any write (a lease taken, an
    attempt timed out, its retry launched, a lease given back) leaves its leases to
    expire; the next sweeper takes them over and finishes the work, exactly once."""
    defn = WorkflowDefinition("lease_crash", (ActivityDefinition(
        "A", launcher=LauncherSpec("lambda", {"function": "f"}), heartbeat_timeout_seconds=10,
        retry=RetryPolicy(max_attempts=2, initial_interval_seconds=0)),))
    rwb.register_workflow(defn)

    def setup(tag: str) -> list[str]:
        wxs = [rwb.start_workflow("lease_crash", request_id=f"{tag}-{i}") for i in range(2)]
        for wx in wxs:
            rwb.transition_activity(activity_exec_id(wx, "A", 1), "RUNNING")
        step_clock.advance(11 + rwb.engine.in_flight_grace_seconds)
        return wxs

    counter = FaultInjector()
    clean = setup("clean")
    rwb.store.write_hooks.append(counter)
    report = rwb.sweep(step_clock())
    rwb.store.write_hooks.remove(counter)
    assert len(report.timed_out) == 2 and report.leases
    writes = counter.count
    lease_writes = [w for w in counter.writes if w[2] == "lease"]
    assert len(lease_writes) == 2 * len(report.leases)  # each taken, then given back
    tried = 0
    fired: set[tuple[str, str]] = set()
    for k in range(1, writes + 1):
        for phase in ("before", "after"):
            wxs = setup(f"k{k}-{phase}")
            injector = FaultInjector(at=k, phase=phase)
            rwb.store.write_hooks.append(injector)
            try:
                rwb.sweep(step_clock())
            except Crash:
                pass
            finally:
                rwb.store.write_hooks.remove(injector)
            # (A pass whose runs hash onto fewer shards takes fewer leases: fewer writes.)
            tried += injector.fired is not None
            if injector.fired is not None:
                fired.add(injector.fired[1:])
            # The next sweepers, once the dead one's leases expired, and the runs'
            # reconcile visits (what the dead pass left half done: a lost retry).
            step_clock.advance(SWEEP_LEASE_SECONDS + 1)
            rwb.sweep(step_clock())
            rwb.sweep(step_clock.advance(RECONCILE_GRACE_SECONDS))
            for wx in (*clean, *wxs):
                wf = rwb.get_workflow(wx)
                first, second = activity_exec_id(wx, "A", 1), activity_exec_id(wx, "A", 2)
                assert wf.activity("A").activity_exec_id == second, (k, phase, injector.fired)
                assert rwb.get_activity(first).state is ActivityState.TIMED_OUT
                assert_contract_holds(wf, defn, launched=[
                    r.activity_exec_id for r in launcher.requests if r.workflow_exec_id == wx])
            # Nothing stays held: every lease was given back, or is a dead pass's that
            # expired (free to anyone; TTL deletes it a day later).
            for shard in range(specs.SWEEP_LEASES):
                lease = rwb.store.leases.get_lease(specs.sweep_lease_id(shard))
                assert lease is None or lease.until_epoch < step_clock(), (k, phase, lease)
    assert launcher.doubled() == []
    assert tried >= 2 * (writes - 2)
    # Every kind of write of the pass was a crash point: the leases' too.
    assert {("PutItem", "lease"), ("DeleteItem", "lease"), ("UpdateItem", "activity_exec")} \
        <= fired
    print(f"\nsweep with leases: {writes} writes in a clean pass "
          f"({len(lease_writes)} of them leases), {tried} crash points tried")
