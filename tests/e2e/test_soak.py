"""Soak through the local runtime (reliability part 6).

Many workflows of about ten activities each, of random (seeded) DAG shapes, go in through
the Simple API (``workflow_request`` rows written with plain boto3) and run on the real
stream pumps, handlers and heartbeat schedule. Each activity attempt follows a plan
carried in the workflow's input:

* python activities succeed, fail (retries follow, some run out), or go **silent**: they
  stop heartbeating and the heartbeat listener must time them out (1.5-2 s time-outs);
* external activities are claimed by a worker thread and reported with
  ``activity_event`` rows (``COMPLETED`` or ``FAILED``);
* some workflows are **cancelled** a moment after a blocking root activity started;
* a few malformed request and event rows are written among them.

Everything is bounded by a deadline derived from the size. At the end every workflow must
be terminal in the state its plan determines, every attempt in the state its plan says,
the contract must hold, no attempt may have run twice, every finished workflow must have
left the reconcile, timer and claim indexes, and the rejection table must hold exactly
the bad rows (nothing dead-lettered).

Size: ``WHIMBREL_SOAK_WORKFLOWS`` (default 40; the full soak is 1000), seed
``WHIMBREL_SOAK_SEED``, workflows in flight at once ``WHIMBREL_SOAK_IN_FLIGHT``.
``WHIMBREL_SOAK_DEADLINE`` overrides the time limit (seconds) derived from the size.
``WHIMBREL_SOAK_REDELIVERY=<seed>`` also delivers every stream record 1-3 times,
interleaved (:class:`~whimbrel.local.delivery.RandomRedelivery`).
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
import wb_test_activities
from e2e_support import RawClient

from whimbrel import (
    ActivityDefinition,
    ActivityExec,
    LauncherSpec,
    RetryPolicy,
    WorkflowDefinition,
    WorkflowExec,
)
from whimbrel.contract.errors import WhimbrelError
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.local.delivery import RandomRedelivery
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import assert_contract_holds, wait_until

pytestmark = pytest.mark.slow

SIZE = int(os.environ.get("WHIMBREL_SOAK_WORKFLOWS", "40"))
SEED = int(os.environ.get("WHIMBREL_SOAK_SEED", "20251121"))
IN_FLIGHT = int(os.environ.get("WHIMBREL_SOAK_IN_FLIGHT", "40"))
REDELIVERY = os.environ.get("WHIMBREL_SOAK_REDELIVERY")
#: How often the heartbeat listener (sweep) runs.
SWEEP_EVERY = float(os.environ.get("WHIMBREL_SOAK_SWEEP_EVERY", "0.2"))
#: Seconds allowed for all workflows to end: a start-up allowance plus a budget per
#: workflow (the full soak took about 0.65 s per workflow on 2 shared cores; the default
#: 40 take 40-90 s, and a load average of 7 on those cores once needed more than 140).
#: A deadline, not a speed target: a stuck run still fails it.
DEADLINE = float(os.environ.get("WHIMBREL_SOAK_DEADLINE") or 120.0 + 4.0 * SIZE)

SOAK = LauncherSpec.python("wb_test_activities:soak")
#: What each planned step leaves an attempt in.
OUTCOME = {"ok": "COMPLETED", "fail": "FAILED", "silent": "TIMED_OUT", "block": "CANCELLED"}


# -- shapes and plans ------------------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    definition: WorkflowDefinition
    #: activity -> (kind, max_attempts, heartbeat timeout)
    traits: dict[str, tuple[str, int, float | None]]


def make_shape(rng: random.Random, index: int) -> Shape:
    n = rng.randint(8, 12)
    acts: list[ActivityDefinition] = []
    traits: dict[str, tuple[str, int, float | None]] = {}
    for i in range(n):
        name = f"A{i}"
        if i == 0:  # a python root that can block (cancel workflows) or go silent
            kind, attempts, hb = "python", 2, 2.0
        else:
            kind = "external" if rng.random() < 0.25 else "python"
            attempts = rng.choice((1, 2, 2, 3, 3))
            hb = None if kind == "external" else rng.choice((None, 1.5, 2.0, 2.0))
        k = rng.choices((0, 1, 2, 3), weights=(10, 50, 30, 10))[0] if i else 0
        deps = tuple(sorted(rng.sample([f"A{j}" for j in range(i)], min(k, i))))
        retry = RetryPolicy(max_attempts=attempts,
                            initial_interval_seconds=rng.choice((0.0, 0.3)))
        acts.append(ActivityDefinition(
            name, deps, launcher=SOAK if kind == "python" else LauncherSpec.external(),
            heartbeat_timeout_seconds=hb, retry=retry))
        traits[name] = (kind, attempts, hb)
    return Shape(WorkflowDefinition(f"soak_{index}", tuple(acts)), traits)


@dataclass
class Planned:
    index: int
    shape: Shape
    kind: str  # "clean", "doomed" or "cancel"
    plan: dict[str, list[str]]
    request_id: str = ""

    @property
    def workflow_exec_id(self) -> str:
        return workflow_exec_id_for(self.request_id)

    @property
    def expected(self) -> str:
        return {"clean": "COMPLETED", "doomed": "FAILED", "cancel": "CANCELLED"}[self.kind]


def make_plan(rng: random.Random, index: int, shape: Shape) -> Planned:
    roll = rng.random()
    kind = "cancel" if roll < 0.12 else "doomed" if roll < 0.27 else "clean"
    names = shape.definition.names
    doomed = rng.choice(names) if kind == "doomed" else None
    plan: dict[str, list[str]] = {}
    for name in names:
        act_kind, attempts, hb = shape.traits[name]
        bad_steps = ["fail", "silent"] if act_kind == "python" and hb and hb <= 2 else ["fail"]
        if kind == "cancel" and name == "A0":
            steps = ["block"] * attempts
        elif name == doomed:
            steps = [rng.choice(bad_steps) for _ in range(attempts)]
        else:  # recovers: at most attempts - 1 bad attempts, then ok
            bad = 0 if rng.random() < 0.6 else rng.randint(0, attempts - 1)
            steps = [rng.choice(bad_steps) for _ in range(bad)] + ["ok"]
        if steps != ["ok"]:
            plan[name] = steps
    return Planned(index, shape, kind, plan)


# -- the world around the workflows ----------------------------------------------------

@dataclass
class World:
    rt: LocalRuntime
    raw: RawClient
    plans: dict[str, Planned]  # by workflow_exec_id
    stop: threading.Event = field(default_factory=threading.Event)
    claims: Counter[str] = field(default_factory=Counter)
    cancels: set[str] = field(default_factory=set)
    timers: list[threading.Timer] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    rng: random.Random = field(default_factory=lambda: random.Random(SEED + 1))

    def step_of(self, act: ActivityExec) -> str:
        steps = self.plans[act.workflow_exec_id].plan.get(act.activity_name) or []
        return steps[act.attempt - 1] if act.attempt <= len(steps) else "ok"

    def worker(self) -> None:
        """Claims READY external activities and reports them with activity_event rows."""
        while not self.stop.is_set():
            try:
                act = self.rt.client.claim()
            except WhimbrelError as exc:
                self.errors.append(f"claim: {exc}")
                act = None
            if act is None:
                self.stop.wait(0.2)  # each claim reads four index shards: go easy
                continue
            with self.lock:
                self.claims[act.activity_exec_id] += 1
            if self.step_of(act) == "ok":
                self.raw.event(act.activity_exec_id, "COMPLETED",
                               output={"ext": act.activity_name, "attempt": act.attempt})
            else:
                self.raw.event(act.activity_exec_id, "FAILED", error="planned failure")

    def on_block(self, wx: str) -> None:
        """A blocking root started: cancel its workflow a little later (once)."""
        with self.lock:
            if wx in self.cancels or wx not in self.plans:
                return
            self.cancels.add(wx)
            timer = threading.Timer(self.rng.uniform(0.2, 1.5), self._cancel, (wx,))
            timer.daemon = True
            self.timers.append(timer)
        timer.start()

    def _cancel(self, wx: str) -> None:
        try:
            self.rt.client.cancel_workflow(wx)
        except WhimbrelError as exc:
            self.errors.append(f"cancel {wx}: {exc}")


def write_bad_rows(rt: LocalRuntime, some_wx: str) -> set[str]:
    """Malformed rows a careless client might write; returns their keys."""
    ddb = boto3.client("dynamodb", endpoint_url=rt.endpoint_url, region_name="us-east-1")
    keys: set[str] = set()

    def request(**attrs: dict[str, str]) -> None:
        key = f"bad-{uuid.uuid4()}"
        keys.add(key)
        ddb.put_item(TableName=f"{rt.table_prefix}workflow_request",
                     Item={"workflow_request_id": {"S": key}, **attrs})

    def event(**attrs: dict[str, str]) -> None:
        key = f"bad-{uuid.uuid4()}"
        keys.add(key)
        ddb.put_item(TableName=f"{rt.table_prefix}activity_event",
                     Item={"activity_event_id": {"S": key}, **attrs})

    request()  # no workflow_name
    request(workflow_name={"S": "no_such_soak_workflow"})
    request(workflow_name={"S": "soak_0"}, input={"S": "{not json"})
    request(workflow_name={"N": "3"})
    request(workflow_name={"S": "soak_0"}, manual={"S": "yes"})
    event(activity_exec_id={"S": activity_exec_id(some_wx, "A0", 1)})  # no transition
    event(activity_exec_id={"S": activity_exec_id(some_wx, "nope", 1)},
          transition={"S": "RUNNING"})
    event(activity_exec_id={"S": "not-an-id"}, transition={"S": "COMPLETED"})
    event(activity_exec_id={"S": activity_exec_id(some_wx, "A0", 1)},
          transition={"S": "JUMP"})
    event(activity_exec_id={"S": activity_exec_id(some_wx, "A0", 1)},
          transition={"S": "TIME_OUT"})
    return keys


def rejected_key(record: Any) -> str | None:
    image = (record.get("dynamodb") or {}).get("NewImage") or {} \
        if isinstance(record, dict) else {}
    for name in ("workflow_request_id", "activity_event_id"):
        value = (image.get(name) or {}).get("S")
        if value:
            return str(value)
    return None


def stuck_summary(rt: LocalRuntime, plans: dict[str, Planned], pending: list[str]) -> str:
    """Which workflows are not finished, in which states (for a timed-out soak)."""
    groups: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for wx in pending[:200]:
        try:
            wf = rt.client.get_workflow(wx)
        except WhimbrelError:
            key = "not started"
        else:
            live = sorted(f"{a.activity_name}#{a.attempt}:{a.state.value}"
                          for a in wf.activities if not a.state.is_terminal)
            key = f"{wf.state.value} ({plans[wx].kind}) with " \
                  f"{sorted({s.split(':')[1] for s in live})}"
            examples.setdefault(key, f"{wx}: {live}")
        groups[key] += 1
    return "; ".join(f"{n} x {k}, e.g. {examples.get(k, '')}" for k, n in groups.most_common())


# -- checks ----------------------------------------------------------------------------

@dataclass
class Figures:
    workflows: int = 0
    by_state: Counter[str] = field(default_factory=Counter)
    activities: int = 0
    attempts: int = 0
    attempts_by_state: Counter[str] = field(default_factory=Counter)
    python_runs: int = 0
    external_claims: int = 0
    silent_timed_out: int = 0
    unplanned_timeouts: list[str] = field(default_factory=list)
    cancels: int = 0
    bad_rows: int = 0
    durations: list[float] = field(default_factory=list)  # created -> ended, per workflow

    def duration(self, q: float) -> float:
        ordered = sorted(self.durations)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def check_workflow(world: World, wf: WorkflowExec, figures: Figures) -> list[str]:
    """Everything wrong with one finished workflow (empty when all is well)."""
    p = world.plans[wf.workflow_exec_id]
    defn = p.shape.definition
    where = f"workflow #{p.index} {wf.workflow_exec_id} ({defn.name}, {p.kind})"
    problems: list[str] = []
    try:
        assert_contract_holds(wf, defn)
    except AssertionError as exc:
        problems.append(f"{where}: {exc}")
    unplanned = []
    for act in wf.activities:
        path = [h.state for h in act.history]
        step = world.step_of(act)
        want = OUTCOME[step]
        got = act.state.value
        figures.attempts += 1
        figures.attempts_by_state[got] += 1
        runs = wb_test_activities.RUNS.get(act.activity_exec_id, 0)
        claims = world.claims.get(act.activity_exec_id, 0)
        figures.python_runs += runs
        if runs > 1 or claims > 1:
            problems.append(f"{where}: {act.activity_exec_id} ran {runs} times, "
                            f"claimed {claims} times")
        if got == want:
            if step == "silent":
                figures.silent_timed_out += 1
            if got == "COMPLETED":
                kind = p.shape.traits[act.activity_name][0]
                deps = sorted(defn.activity(act.activity_name).depends_on)
                expect_out = ({"name": act.activity_name, "attempt": act.attempt,
                               "upstream": deps} if kind == "python" else
                              {"ext": act.activity_name, "attempt": act.attempt})
                if act.output != expect_out:
                    problems.append(f"{where}: {act.activity_exec_id} output {act.output!r}, "
                                    f"expected {expect_out!r}")
            continue
        if got == "CANCELLED" and (wf.state.value == "CANCELLED" or runs + claims == 0):
            # Cancelled with its workflow, or stopped before its work began (never
            # started, or started after its workflow had begun to fail).
            continue
        if got == "TIMED_OUT" and step != "silent":
            unplanned.append(f"{act.activity_exec_id} ({step})")  # too slow under load
            continue
        problems.append(f"{where}: {act.activity_exec_id} planned {step!r} ended {got} via "
                        f"{path}; error {act.error!r}")
    figures.unplanned_timeouts += unplanned
    if not unplanned and wf.state.value != p.expected:
        # (An unplanned time-out changes the plan; then only the contract must hold.)
        problems.append(f"{where}: ended {wf.state.value}, expected {p.expected}: {wf.error}")
    # A finished workflow leaves every sparse index: nothing for a later sweep to visit.
    raw = world.rt.client.store.get_workflow(wf.workflow_exec_id)
    if raw is None or raw.check_epoch is not None:
        problems.append(f"{where}: reconcile index still armed")
    for item in world.rt.client.store.list_activities(wf.workflow_exec_id):
        if item.timer_epoch is not None or item.claim_key is not None:
            problems.append(f"{where}: {item.activity_exec_id} still indexed ({item.state}, "
                            f"timer {item.timer_epoch}, claim {item.claim_key})")
    figures.workflows += 1
    figures.durations.append(float(wf.ended_epoch or 0) - wf.created_epoch)
    figures.by_state[wf.state.value] += 1
    figures.activities += len(defn.names)
    return problems


# -- the test --------------------------------------------------------------------------

def test_soak(ddb_endpoint: str, table_prefix: str,
              record_property: Callable[[str, object], None]) -> None:
    rng = random.Random(SEED)
    shapes = [make_shape(rng, i) for i in range(max(4, min(25, SIZE // 10)))]
    plans = [make_plan(rng, i, rng.choice(shapes)) for i in range(SIZE)]
    began = time.monotonic()
    wb_test_activities.SOAK_WAIT_LIMIT[0] = min(DEADLINE, 300.0)
    policies: list[RandomRedelivery] = []

    def redelivery(consumer: Any) -> RandomRedelivery:
        policies.append(RandomRedelivery(int(REDELIVERY or 0) * 1000 + len(policies),
                                         max_batch=consumer.batch_size, reorder=True))
        return policies[-1]

    with LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=SWEEP_EVERY,
                      delivery=redelivery if REDELIVERY else None,
                      lambda_log_level="CRITICAL") as rt:
        world = World(rt, RawClient(ddb_endpoint, table_prefix), {})
        wb_test_activities.ON_BLOCK.append(world.on_block)
        workers = [threading.Thread(target=world.worker, name="soak-worker", daemon=True)]
        try:
            for shape in shapes:
                rt.client.register_workflow(shape.definition)
            for w in workers:
                w.start()
            todo = list(plans)
            live: list[str] = []
            bad_keys: set[str] = set()

            def advance() -> bool:
                """Submit up to IN_FLIGHT workflows at a time; True when all ended."""
                nonlocal live, bad_keys
                if live:
                    ended = {w.workflow_exec_id for i in range(0, len(live), 100)
                             for w in rt.client.store.batch_get_workflows(live[i:i + 100])
                             if w.state in ("COMPLETED", "FAILED", "CANCELLED")}
                    live = [wx for wx in live if wx not in ended]
                while todo and len(live) < IN_FLIGHT:
                    p = todo.pop(0)
                    p.request_id = world.raw.request(p.shape.definition.name,
                                                     {"n": p.index, "plan": p.plan})
                    world.plans[p.workflow_exec_id] = p
                    live.append(p.workflow_exec_id)
                    if p.index == SIZE // 2:
                        bad_keys = write_bad_rows(rt, p.workflow_exec_id)
                return not todo and not live

            wait_until(advance, timeout=DEADLINE, interval=0.25,
                       message=lambda: f"seed {SEED}: {len(todo)} never submitted, "
                                       f"{len(live)} not finished after {DEADLINE:g} s: "
                                       f"{stuck_summary(rt, world.plans, live)}")
            elapsed = time.monotonic() - began
            checks_began = time.monotonic()
            world.stop.set()
            for w in workers:
                w.join(10)
            rt.wait_idle(timeout=60)
            assert world.errors == [], world.errors

            figures = Figures(cancels=len(world.cancels))
            problems = [problem for p in plans for problem in
                        check_workflow(world, rt.client.get_workflow(p.workflow_exec_id),
                                       figures)]
            assert problems == [], f"seed {SEED}: {len(problems)} problems:\n  " \
                                   + "\n  ".join(problems[:30])
            figures.external_claims = sum(world.claims.values())
            assert figures.workflows == SIZE

            # Bad rows are rejected with a reason; nothing else is, nothing dead-letters.
            def all_rejected() -> list[Any] | None:
                found = rt.client.list_rejections(limit=None)
                return found if len(found) >= len(bad_keys) else None

            rows = wait_until(all_rejected, timeout=30,
                              message=lambda: f"rejections: {rt.client.list_rejections()}")
            assert {rejected_key(r.record) for r in rows} == bad_keys, \
                [(r.source, r.reason) for r in rows]
            assert all(r.source in ("workflow_request", "activity_event") for r in rows)
            assert all(p.stats.dead_lettered == 0 for p in rt.pumps.values())
            figures.bad_rows = len(rows)
            if SIZE >= 20:  # the plans really exercised every path
                assert figures.by_state.keys() == {"COMPLETED", "FAILED", "CANCELLED"}
                assert figures.silent_timed_out > 0 and figures.cancels > 0
                assert figures.attempts_by_state["FAILED"] > 0
            checked = time.monotonic() - checks_began
        finally:
            world.stop.set()
            for t in world.timers:
                t.cancel()
            wb_test_activities.ON_BLOCK.remove(world.on_block)
            wb_test_activities.SOAK_WAIT_LIMIT[0] = 120.0
            rt.client.store.delete_tables()
    pumps = {n: vars(p.stats) for n, p in rt.pumps.items()}
    if policies:
        pumps["redelivery"] = {n: vars(p.figures()) for n, p in zip(rt.pumps, policies,
                                                                     strict=True)}
    report = (f"\nsoak seed {SEED}: {SIZE} workflows ({dict(figures.by_state)}), "
              f"{figures.activities} activities, {figures.attempts} attempts "
              f"({dict(figures.attempts_by_state)}), {figures.python_runs} python runs, "
              f"{figures.external_claims} external claims, {figures.silent_timed_out} silent "
              f"attempts timed out, {len(figures.unplanned_timeouts)} unplanned time-outs, "
              f"{figures.cancels} cancels, {figures.bad_rows} bad rows rejected, "
              f"{rt.heartbeat_runs} sweeps; {elapsed:.1f} s to finish all "
              f"(deadline {DEADLINE:g} s, {IN_FLIGHT} in flight), {checked:.1f} s to check; "
              f"workflow duration median {figures.duration(0.5):.1f} s, "
              f"p90 {figures.duration(0.9):.1f} s, max {figures.duration(1.0):.1f} s; "
              f"pumps {pumps}")
    print(report)
    record_property("soak", report)
