"""What a pool, a rate and ``max_running`` cost (issue 22), and how far one pool goes:
the write and read units an admission adds to a run, measured with ``Whimbrel.meter``
(DynamoDB Local's ``ConsumedCapacity``, index writes included) as the difference between
the same run with and without the limit; and the units each partition-key value of the
``pool`` table takes per admission, from every request's own ``ConsumedCapacity``, which
sets the ceiling of one pool (AWS serves 1,000 WCU/s per key value).

``pytest tests/integration/test_pool_costs.py -s`` prints the tables of
docs/benchmarks.md ("Pools"); the assertions pin the write units.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from whimbrel import (
    ActivityDefinition,
    LauncherSpec,
    Transition,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.ids import shard_of
from whimbrel.store import specs
from whimbrel.testing import StepClock

CLOCK = StepClock
EXT = LauncherSpec.external()
WRU_PRICE = 0.625


def _defn(name: str, *, pool: str | None = None,
          max_running: int | None = None) -> WorkflowDefinition:
    return WorkflowDefinition(name, (ActivityDefinition("a", launcher=EXT, pool=pool),),
                              max_running=max_running)


def _run_through(wb: Whimbrel, name: str) -> str:
    wx = wb.start_workflow(name)
    got = wb.claim(workflow_name=name)
    assert got is not None and got.workflow_exec_id == wx
    wb.transition_activity(got.activity_exec_id, Transition.COMPLETED, output={"ok": 1})
    assert wb.engine.reads.workflow(wx).state is WorkflowState.COMPLETED
    return wx


def _units(wb: Whimbrel, fn: Any) -> tuple[float, float, dict[str, float]]:
    wb.meter.reset()
    fn()
    by_table = {t.removeprefix(wb.table_prefix): u for t, u in wb.meter.write_units.items()}
    return wb.meter.total_write_units, wb.meter.total_read_units, by_table


def test_what_an_admission_costs(wb: Whimbrel, clock: StepClock) -> None:
    wb.set_pool("slots", slots=10, per_second=None)
    wb.set_pool("rate", slots=None, per_second=100.0)
    wb.set_pool("one", slots=1, per_second=None)
    for defn in (_defn("plain"), _defn("slotted", pool="slots"), _defn("rated", pool="rate"),
                 _defn("single", pool="one"), _defn("capped", max_running=10),
                 _defn("queue", max_running=1)):
        wb.register_workflow(defn)
    for name in ("plain", "slotted", "rated", "capped"):
        _run_through(wb, name)  # warm: settings cached, slot and bucket items exist
    base_w, base_r, base = _units(wb, lambda: _run_through(wb, "plain"))

    def waited() -> None:  # a run admitted after waiting: the second of two
        first, second = wb.start_workflow("single"), wb.start_workflow("single")
        for wx in (first, second):
            got = wb.claim(workflow_name="single")
            assert got is not None and got.workflow_exec_id == wx
            wb.transition_activity(got.activity_exec_id, Transition.COMPLETED)

    def queued() -> None:  # a run QUEUED behind another, started by its end
        first, second = wb.start_workflow("queue"), wb.start_workflow("queue")
        assert wb.engine.reads.workflow(second).state is WorkflowState.QUEUED
        for wx in (first, second):
            got = wb.claim(workflow_name="queue")
            assert got is not None and got.workflow_exec_id == wx
            wb.transition_activity(got.activity_exec_id, Transition.COMPLETED)

    # The measured activity is a root: a pooled root is created REQUESTED and moved on
    # by the pool's admission (+1 activity_exec write against one created claimable).
    rows = [
        ("pool slot, free", lambda: _run_through(wb, "slotted"), 1, 5.0),
        ("pool rate, token there", lambda: _run_through(wb, "rated"), 1, 2.0),
        ("pool slot: one free, one after waiting", waited, 2, 13.0),
        ("max_running, free slot", lambda: _run_through(wb, "capped"), 1, 4.0),
        # QUEUED -> RUNNING moves both listing keys, by_name_state and (issue 29)
        # by_state: 2 index writes each.
        ("max_running: one free, one QUEUED first", queued, 2, 15.0),
    ]
    print(f"\nbaseline run (one external activity): {base_w:g} WRU, {base_r:g} RRU")
    print("| admission | WRU added | RRU added | WRU by table | $ / million admissions |")
    print("|---|---:|---:|---|---:|")
    measured = []
    for label, fn, runs, wru in rows:
        w, r, by_table = _units(wb, fn)
        added_w, added_r = w - runs * base_w, r - runs * base_r
        tables = ", ".join(f"`{t}` {u - runs * base.get(t, 0.0):+g}"
                           for t, u in sorted(by_table.items())
                           if u - runs * base.get(t, 0.0))
        print(f"| {label} | {added_w:g} | {added_r:g} | {tables} | "
              f"{added_w * WRU_PRICE:.2f} |")
        measured.append((label, added_w, wru))
    assert [(label, w) for label, w, _ in measured] == [(label, w) for label, _, w in measured]


def test_the_ceiling_of_one_pool(wb: Whimbrel) -> None:
    """Units per partition-key value of the ``pool`` table over 160 admissions through
    a pool of 8 slots: the hottest key sets the pool's ceiling."""
    slots, runs = 8, 160
    wb.set_pool("wide", slots=slots, per_second=None)
    wb.register_workflow(_defn("wide", pool="wide"))
    per_key: Counter[str] = Counter()
    per_index_key: Counter[str] = Counter()
    table = specs.table_spec("pool").table_name(wb.table_prefix)

    def observe(op: str, params: dict[str, Any], resp: dict[str, Any]) -> None:
        if params.get("TableName") != table or op not in ("UpdateItem", "PutItem",
                                                          "DeleteItem"):
            return
        key = (params.get("Key") or params.get("Item") or {}).get("pool_key", {}).get("S")
        cap = (resp or {}).get("ConsumedCapacity") or {}  # None: a failed condition
        per_key[key] += float((cap.get("Table") or {}).get("CapacityUnits", 0.0))
        checks = (cap.get("GlobalSecondaryIndexes") or {}).get("pool_checks") or {}
        if checks:
            per_index_key[key] += float(checks.get("CapacityUnits", 0.0))

    wb.store.transport.observers.append(observe)
    try:
        started = [wb.start_workflow("wide") for _ in range(runs)]
        done = 0
        while done < runs:
            got = wb.claim(workflow_name="wide")
            assert got is not None
            wb.transition_activity(got.activity_exec_id, Transition.COMPLETED)
            done += 1
    finally:
        wb.store.transport.observers.remove(observe)
    assert {wb.engine.reads.workflow(wx).state for wx in started} == {WorkflowState.COMPLETED}
    slot_keys = {k: u for k, u in per_key.items() if k and "#rate#" not in k
                 and k.count("#") == 2 and k.startswith("pool#")}
    assert len(slot_keys) == slots
    waiters = {k: u for k, u in per_key.items() if k and k.startswith("wait#")}
    checks: Counter[str] = Counter()
    for key, units in per_index_key.items():
        checks[shard_of(key, specs.POOL_CHECK_SHARDS)] += units
    hot = {"slot item": max(slot_keys.values()) / runs,
           "waiter shard": max(waiters.values()) / runs,
           "pool_checks index shard": max(checks.values()) / runs}
    print(f"\n{runs} admissions through {slots} slots (all but {slots} waited):")
    print("| key | WCU per admission, all keys | hottest key | admissions/s at 1,000 WCU/s |")
    print("|---|---:|---:|---:|")
    for what, total in (("slot item", sum(slot_keys.values())),
                        ("waiter shard", sum(waiters.values())),
                        ("pool_checks index shard", sum(checks.values()))):
        print(f"| {what} | {total / runs:.2f} | {hot[what]:.3f} | {1000 / hot[what]:,.0f} |")
    # Each admission writes its slot twice (taken, given back), never another's.
    assert sum(slot_keys.values()) == 2 * runs
    assert hot["slot item"] <= 2 * 2 / slots  # within twice the even share


def test_keyed_pools_spread_over_their_keys(wb: Whimbrel) -> None:
    """Issue 29 item 5: 160 admissions of 40 tenants (4 runs each, started at once) through
    a pool of 2 slots keyed by tenant: every key has its own slot items and waiter shards,
    so the hottest item carries a tenant's share, and a keyed admission writes what an
    unkeyed one does (the key is read from the run's input, no request of its own)."""
    tenants, per_tenant, slots = 40, 4, 2
    runs = tenants * per_tenant
    wb.set_pool("tenants", slots=slots, per_second=None)
    wb.set_pool("flat", slots=10, per_second=None)
    wb.register_workflow(WorkflowDefinition("keyed", (ActivityDefinition(
        "a", launcher=EXT, pool="tenants", pool_key="input.tenant"),)))
    wb.register_workflow(_defn("flat", pool="flat"))
    table = specs.table_spec("pool").table_name(wb.table_prefix)
    per_key: Counter[str] = Counter()

    def observe(op: str, params: dict[str, Any], resp: dict[str, Any]) -> None:
        if params.get("TableName") != table or op not in ("UpdateItem", "PutItem",
                                                          "DeleteItem"):
            return
        key = (params.get("Key") or params.get("Item") or {}).get("pool_key", {}).get("S")
        cap = (resp or {}).get("ConsumedCapacity") or {}
        per_key[key] += float((cap.get("Table") or {}).get("CapacityUnits", 0.0))

    def one(name: str, given: Any) -> None:
        wx = wb.start_workflow(name, given)
        got = wb.claim(workflow_name=name)
        assert got is not None and got.workflow_exec_id == wx
        wb.transition_activity(got.activity_exec_id, Transition.COMPLETED)

    one("flat", None)  # warm: settings cached
    one("keyed", {"tenant": "warm"})
    flat_w = _units(wb, lambda: one("flat", None))[0]
    keyed_w = _units(wb, lambda: one("keyed", {"tenant": "t-new"}))[0]
    assert keyed_w == flat_w  # the key costs no write
    wb.store.transport.observers.append(observe)
    try:
        started = [wb.start_workflow("keyed", {"tenant": f"t{i % tenants}"})
                   for i in range(runs)]
        for _ in range(runs):
            got = wb.claim(workflow_name="keyed")
            assert got is not None
            wb.transition_activity(got.activity_exec_id, Transition.COMPLETED)
    finally:
        wb.store.transport.observers.remove(observe)
    assert {wb.engine.reads.workflow(wx).state for wx in started} == {WorkflowState.COMPLETED}
    slot_keys = {k: u for k, u in per_key.items() if k and k.startswith("pool#tenants~")
                 and k.count("#") == 2}
    waiters = {k: u for k, u in per_key.items() if k and k.startswith("wait#tenants~")}
    assert len(slot_keys) == tenants * slots and sum(slot_keys.values()) == 2 * runs
    hot_slot, hot_wait = max(slot_keys.values()), max(waiters.values())
    print(f"\n{runs} admissions of {tenants} tenants through 2 slots per tenant "
          f"(a keyed free admission: {keyed_w:g} WRU, unkeyed {flat_w:g}):")
    print("| key | keys written | WCU, all keys | hottest key | its share |")
    print("|---|---:|---:|---:|---:|")
    for what, found, hot in (("slot item", slot_keys, hot_slot),
                             ("waiter shard", waiters, hot_wait)):
        total = sum(found.values())
        print(f"| {what} | {len(found)} | {total:g} | {hot:g} | {hot / total:.1%} |")
    # A key's slot items take only that key's admissions: 4 runs, 2 writes each.
    assert hot_slot <= 2 * per_tenant
