"""Model-based test (issue 5, part 4): a Hypothesis state machine drives random
workflows against DynamoDB Local and compares every activity attempt and workflow state
with a pure model of the contract after every step.

The model knows the engine's policies (retries with a not-before time, settling a
failing or cancelled workflow, time-outs by the sweep after the in-flight grace), and
since issue 13 signal waits (kept signals, which wait receives which signal, timeouts)
and suspend/resume (held deadlines); since issue 20 lost rows (a raw DeleteItem of a
READY, RUNNING or CANCELLED_RUNNING attempt's row: LOST at the run's next reconcile
visit, then its retry policy; no attempt id handed out is ever handed out again) and
late results (a COMPLETED/FAILED of a TIMED_OUT or LOST attempt: ActivityTimedOut, kept
as late output, its state unchanged). The only freedom it allows the engine is the
order in which one sweep (or a resume) fires several due timers of one workflow: it
accepts any order whose outcome matches.

Since issue 22 some external activities share a pool of one slot (one pool per example,
across its runs). Admission changes no state (a waiting pull attempt is READY, only out
of the claimable index), so the model's states stand as they are; the pool is checked
as invariants on the tables after every step: never two live holders, nothing claimable
or running without its slot, a slot held only by its holder (or by one that just
ended, until its release), and a caller's start of an attempt the pool holds refused.
Since issue 29 every other example keys its pool by the run's input (two keys over its
runs): the same invariants hold for each key's slots, each key to its own limit.
"""

from __future__ import annotations

import itertools
import os
from copy import deepcopy
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from whimbrel import (
    ActivityDefinition,
    LauncherSpec,
    RetryPolicy,
    SignalRefused,
    Whimbrel,
    WorkflowAlreadyEnded,
    WorkflowDefinition,
)
from whimbrel.contract.errors import (
    ActivityCancelled,
    ActivityTimedOut,
    IllegalTransition,
    InvalidInput,
    NotAllowedNow,
    StateConflict,
)
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.contract.pools import keyed_pool, parse_slot_ref
from whimbrel.contract.states import (
    ACTIVITY_TRANSITIONS,
    ActivityState,
    Transition,
    WorkflowState,
)
from whimbrel.engine.engine import IN_FLIGHT_GRACE_SECONDS
from whimbrel.store.memory import MemoryDynamoDB
from whimbrel.testing import StepClock, assert_contract_holds

A, W, T = ActivityState, WorkflowState, Transition
#: ActivityDefinition's default launch guard: a QUEUED/PREPARING attempt that does not
#: reach RUNNING within it is TIMED_OUT by the sweep.
START_TIMEOUT = 300.0
EXAMPLES = int(os.environ.get("WHIMBREL_MODEL_EXAMPLES", "12"))
STEPS = int(os.environ.get("WHIMBREL_MODEL_STEPS", "20"))
#: Shrinking a failure on DynamoDB Local can take Hypothesis past five minutes; the
#: unshrunk failure already names every step (derandomized: it replays as it was).
#: ``WHIMBREL_MODEL_SHRINK=1`` shrinks it, for a shorter story when debugging.
PHASES = [Phase.explicit, Phase.generate] + (
    [Phase.shrink] if os.environ.get("WHIMBREL_MODEL_SHRINK") == "1" else [])
#: Signal names of the waits drawn (two waits may share one), and their timeout.
SIGNAL_NAMES = ("go", "stop")
SIGNAL_TIMEOUT = 100.0
COUNTS = {"examples": 0, "steps": 0}
#: What the wait rules did (printed with the figures, so a run shows they were exercised).
WAIT_COUNTS: dict[str, int] = {}


@dataclass
class MAct:
    name: str
    attempt: int
    state: ActivityState
    deadline: float | None = None  # armed timer: heartbeat, retry not-before, wait timeout
    signal: str | None = None  # the signal id a signal wait received
    lost: bool = False  # its row was deleted; not yet noticed by a reconcile visit

    def due_at(self) -> float | None:
        """When the sweep fires its deadline: a running attempt's after the in-flight
        grace (a result written in time may still be on its way)."""
        if self.deadline is None:
            return None
        active = self.state in (A.RUNNING, A.CANCELLED_RUNNING)
        return self.deadline + (IN_FLIGHT_GRACE_SECONDS if active else 0.0)


@dataclass
class MWorkflow:
    wx: str
    defn: WorkflowDefinition
    state: WorkflowState = W.RUNNING
    acts: list[MAct] = field(default_factory=list)
    #: Signals kept for a wait to come: (name, signal_id), oldest first.
    kept: list[tuple[str, str]] = field(default_factory=list)

    def latest(self, name: str) -> MAct:
        return max((a for a in self.acts if a.name == name), key=lambda a: a.attempt)

    def signal_name(self, name: str) -> str | None:
        launcher = self.defn.activity(name).launcher
        return str(launcher.config["name"]) if launcher.kind == "signal" else None

    def received(self, signal_id: str) -> bool:
        return any(a.signal == signal_id for a in self.acts)


class Model:
    """The contract and the engine's policies, with no I/O."""

    def __init__(self) -> None:
        self.wfs: dict[str, MWorkflow] = {}

    def start(self, wx: str, defn: WorkflowDefinition, now: float) -> None:
        wf = MWorkflow(wx, defn, acts=[MAct(a.name, 1, A.REQUESTED) for a in defn.activities])
        for a in wf.acts:
            if not defn.activity(a.name).depends_on:
                self.ready(wf, a, now)
        self.wfs[wx] = wf

    def ready(self, wf: MWorkflow, a: MAct, now: float) -> None:
        """REQUESTED -> READY; a signal wait arms its timeout and takes the oldest signal
        kept for its name (completing at once)."""
        a.state, a.deadline = A.READY, None
        name = wf.signal_name(a.name)
        if name is None:
            return
        a.deadline = now + SIGNAL_TIMEOUT
        kept = next((k for k in wf.kept if k[0] == name), None)
        if kept is not None:
            wf.kept.remove(kept)
            self.receive(wf, a, kept[1], now)

    def receive(self, wf: MWorkflow, a: MAct, signal_id: str, now: float) -> None:
        a.state, a.deadline, a.signal = A.COMPLETED, None, signal_id
        self.after(wf, a, now)

    def signal(self, wf: MWorkflow, name: str, signal_id: str, now: float) -> str:
        """What sending a signal does: "invalid", "refused", "duplicate", "received",
        "kept" (the model's state is changed accordingly)."""
        waits = [n for n in wf.defn.topological_order() if wf.signal_name(n) == name]
        if not waits:
            return "invalid"
        if wf.received(signal_id) or (name, signal_id) in wf.kept:
            return "duplicate"
        if wf.state not in (W.RUNNING, W.SUSPENDED):
            return "refused"
        for n in waits:
            if wf.latest(n).state is A.READY:
                self.receive(wf, wf.latest(n), signal_id, now)
                return "received"
        for n in waits:
            a = wf.latest(n)
            if not a.state.is_terminal or (a.state in (A.FAILED, A.TIMED_OUT) and
                                           a.attempt < wf.defn.activity(n).retry.max_attempts):
                wf.kept.append((name, signal_id))
                return "kept"
        return "refused"

    def suspend(self, wf: MWorkflow) -> bool:
        if wf.state is W.RUNNING:
            wf.state = W.SUSPENDED
        return wf.state is W.SUSPENDED

    def resume(self, wf: MWorkflow) -> bool:
        if wf.state is W.SUSPENDED:
            wf.state = W.RUNNING
            if all(wf.latest(n).state is A.COMPLETED for n in wf.defn.names):
                wf.state = W.COMPLETED
        return wf.state in (W.RUNNING, W.COMPLETED)

    def find(self, aeid: str) -> tuple[MWorkflow, MAct]:
        for wf in self.wfs.values():
            for a in wf.acts:
                if activity_exec_id(wf.wx, a.name, a.attempt) == aeid:
                    return wf, a
        raise KeyError(aeid)

    # -- moves --------------------------------------------------------------------
    def allows(self, wf: MWorkflow, a: MAct, t: Transition) -> bool:
        """Whether an outside caller's move is accepted: the table and the guards."""
        target = ACTIVITY_TRANSITIONS.get((a.state, t))
        if t in (T.TIME_OUT, T.SKIP) or target is None:
            return False  # the listener's and the engine's moves
        if wf.signal_name(a.name) is not None and t is not T.CANCEL:
            return False  # a wait moves by its signal, or CANCEL
        ups = wf.defn.activity(a.name).depends_on
        if a.state is A.REQUESTED and target in (A.READY, A.QUEUED) and any(
                wf.latest(u).state is not A.COMPLETED for u in ups):
            return False
        return not (target in (A.QUEUED, A.PREPARING, A.RUNNING) and wf.state is not W.RUNNING)

    def move(self, wf: MWorkflow, a: MAct, t: Transition, now: float) -> None:
        new = ACTIVITY_TRANSITIONS[(a.state, t)]
        hb = wf.defn.activity(a.name).heartbeat_timeout_seconds
        if new is A.RUNNING:
            a.deadline = now + hb if hb else None
        elif new.is_terminal or new is A.READY:
            a.deadline = None
        elif new is A.QUEUED or (new is A.PREPARING and a.state is not A.QUEUED):
            a.deadline = now + START_TIMEOUT
        a.state = new
        if new.is_terminal:
            self.after(wf, a, now)

    def came_late(self, a: MAct, verb: Transition, now: float) -> bool:
        """A running attempt's result written at or past its deadline (within the sweep's
        in-flight grace, or before any sweep): judged by when it was written, it times
        the attempt out (engine/written.py; issue 31)."""
        return verb in (T.COMPLETED, T.FAILED) and a.deadline is not None \
            and a.state in (A.RUNNING, A.CANCELLED_RUNNING) and a.deadline <= now

    def time_out(self, wf: MWorkflow, a: MAct, now: float) -> None:
        a.state, a.deadline = A.TIMED_OUT, None
        self.after(wf, a, now)

    def heartbeat(self, wf: MWorkflow, a: MAct, now: float) -> None:
        hb = wf.defn.activity(a.name).heartbeat_timeout_seconds
        if hb:
            a.deadline = now + hb

    def after(self, wf: MWorkflow, a: MAct, now: float) -> None:
        if wf.state in (W.FAILED_WAITING, W.CANCEL_REQUESTED):
            self.settle(wf)
            return
        if wf.state not in (W.RUNNING, W.SUSPENDED):
            return
        defn = wf.defn
        if a.state is A.COMPLETED:
            for dep in defn.dependents(a.name):
                ups = defn.activity(dep).depends_on
                nxt = wf.latest(dep)
                if nxt.state is A.REQUESTED and all(
                        wf.latest(u).state is A.COMPLETED for u in ups):
                    self.ready(wf, nxt, now)
            # A suspended run completes when resumed.
            if wf.state is W.RUNNING and all(
                    wf.latest(s).state is A.COMPLETED for s in defn.sinks):
                wf.state = W.COMPLETED
        elif a.state in (A.FAILED, A.TIMED_OUT, A.LOST):
            spec = defn.activity(a.name)
            if a.attempt < spec.retry.max_attempts:
                delay = spec.retry.delay_after(a.attempt)
                nxt = MAct(a.name, a.attempt + 1, A.REQUESTED, now + delay)
                wf.acts.append(nxt)
                if delay <= 0:
                    self.ready(wf, nxt, now)
            else:
                self.fail(wf)
        else:  # cancelled alone: the run is cancelled (issue 20), not failed
            self.cancel(wf)

    def fail(self, wf: MWorkflow) -> None:
        if wf.state in (W.RUNNING, W.REQUESTED, W.SUSPENDED):
            wf.state = W.FAILED_WAITING
        self.settle(wf)

    def cancel(self, wf: MWorkflow) -> None:
        if wf.state is not W.CANCEL_REQUESTED and not wf.state.is_terminal:
            wf.state = W.CANCEL_REQUESTED
        self.settle(wf)

    def settle(self, wf: MWorkflow) -> None:
        if wf.state not in (W.FAILED_WAITING, W.CANCEL_REQUESTED):
            return
        cancelling = wf.state is W.CANCEL_REQUESTED
        active = False
        for a in wf.acts:
            if a.state.is_terminal or a.lost:
                continue  # a vanished row runs nothing the engine can see
            if a.state is A.CANCELLED_RUNNING:
                active = True
            elif a.state is A.RUNNING:
                active = True
                if cancelling:
                    a.state = A.CANCELLED_RUNNING
            else:
                a.state, a.deadline = A.CANCELLED, None
        if not active:
            wf.state = W.CANCELLED if cancelling else W.FAILED

    def sweep_workflow(self, wf: MWorkflow, order: list[MAct], now: float) -> None:
        for a in order:
            due = a.due_at()
            if due is None or due > now:
                continue
            if wf.state is W.SUSPENDED and a.state in (A.READY, A.REQUESTED):
                continue  # held until the resume
            if a.state in (A.RUNNING, A.CANCELLED_RUNNING, A.READY, A.QUEUED, A.PREPARING):
                a.state, a.deadline = A.TIMED_OUT, None
                self.after(wf, a, now)
            elif a.state is A.REQUESTED:
                a.deadline = None
                if wf.state is W.RUNNING:
                    self.launch_due(wf, a, now)
                else:
                    a.state = A.CANCELLED
                    self.settle(wf)

    def launch_due(self, wf: MWorkflow, a: MAct, now: float) -> None:
        """A retry whose back-off passed, in a RUNNING run, is launched (external: READY;
        a wait arms its deadline)."""
        self.ready(wf, a, now)

    def lose(self, wf: MWorkflow, a: MAct) -> None:
        """Its row is deleted: no timer, no row, until a reconcile visit notices."""
        a.lost, a.deadline = True, None

    def visit(self, wf: MWorkflow, now: float) -> None:
        """A reconcile visit: a RUNNING run's lost rows become LOST (tombstones, in the
        order of the definition), each followed by its retry policy."""
        for name in wf.defn.names:
            for a in [x for x in wf.acts if x.name == name and x.lost]:
                if wf.state is not W.RUNNING:
                    return
                a.lost, a.state = False, A.LOST
                self.after(wf, a, now)

    def snapshot(self, wx: str) -> tuple[str, dict[str, str]]:
        wf = self.wfs[wx]
        return wf.state.value, {activity_exec_id(wx, a.name, a.attempt): a.state.value
                                for a in wf.acts if not a.lost}


Shape = list[tuple[list[int], float | None, int, float, str | None, bool]]


def dags() -> st.SearchStrategy[Shape]:
    """Nodes: upstreams, heartbeat timeout, attempts, retry interval, the signal a wait
    node waits for (None: an external activity), and whether an external one is in the
    example's pool of one slot."""
    node = st.tuples(st.lists(st.integers(0, 3), max_size=2, unique=True),
                     st.sampled_from([None, 30.0]), st.integers(1, 2),
                     st.sampled_from([0.0, 50.0]),
                     st.sampled_from([None, *SIGNAL_NAMES]), st.booleans())
    return st.lists(node, min_size=1, max_size=4)


class WorkflowMachine(RuleBasedStateMachine):
    endpoint: str = ""
    prefix: str = ""
    #: The in-memory twin every example shares (``run_machine(..., "memory", ...)``).
    twin: MemoryDynamoDB | None = None

    def __init__(self) -> None:
        super().__init__()
        COUNTS["examples"] += 1
        self.clock = StepClock()
        self.wb = Whimbrel(endpoint_url=self.endpoint or None, table_prefix=self.prefix,
                           clock=self.clock, max_workers=1, transport=self.twin)
        self.model = Model()
        self.defs = 0
        #: Every attempt id handed out to run (moved to RUNNING by a claim).
        self.handed_out: set[str] = set()
        #: This example's pool of one slot (its runs' pooled activities share it).
        self.pool = f"mpool{COUNTS['examples']}"
        self.wb.set_pool(self.pool, slots=1, per_second=None)
        #: Its limit now (issue 31: a rule raises and lowers it), and the attempts that
        #: held it when it last changed (they may stay above a lowered limit, no other).
        self.slots = 1
        self.before: set[str] = set()
        #: Issue 29: every other example keys its pool by the run's input (keys k0, k1).
        self.keyed = COUNTS["examples"] % 2 == 0

    def teardown(self) -> None:
        self.wb.close()

    # -- helpers ----------------------------------------------------------------------
    def _attempts(self, *states: ActivityState) -> list[tuple[MWorkflow, MAct]]:
        return [(wf, a) for wf in self.model.wfs.values() for a in wf.acts
                if not a.lost and (not states or a.state in states)]

    def _aeid(self, wf: MWorkflow, a: MAct) -> str:
        return activity_exec_id(wf.wx, a.name, a.attempt)

    # -- rules ------------------------------------------------------------------------
    @precondition(lambda self: len(self.model.wfs) < 3)
    @rule(shape=dags())
    def start(self, shape: Shape) -> None:
        self.defs += 1
        acts = []
        for i, (deps, hb, attempts, interval, signal, pooled) in enumerate(shape):
            launcher = (LauncherSpec.external() if signal is None else
                        LauncherSpec.signal(signal, timeout_seconds=SIGNAL_TIMEOUT))
            acts.append(ActivityDefinition(
                f"N{i}", tuple(sorted({f"N{d}" for d in deps if d < i})),
                launcher=launcher, heartbeat_timeout_seconds=hb if signal is None else None,
                retry=RetryPolicy(max_attempts=attempts, initial_interval_seconds=interval),
                pool=self.pool if pooled and signal is None else None,
                pool_key="input.k" if pooled and signal is None and self.keyed else None))
        defn = WorkflowDefinition(f"m{COUNTS['examples']}-{self.defs}", tuple(acts))
        self.wb.register_workflow(defn)
        request = f"{defn.name}-req"
        given = {"i": self.defs, "k": f"k{self.defs % 2}"}
        # str(): the model is deep-copied, and a StartedRun does not copy (see report).
        wx = str(self.wb.start_workflow(defn.name, given, request_id=request))
        assert wx == workflow_exec_id_for(request)
        self.model.start(wx, defn, self.clock())
        # Starting again with the same request id changes nothing.
        assert self.wb.start_workflow(defn.name, given, request_id=request) == wx

    def _claimable(self) -> list[tuple[MWorkflow, MAct]]:
        return [(wf, a) for wf, a in self._attempts(A.READY)
                if wf.state is W.RUNNING and wf.signal_name(a.name) is None]

    def _held(self, wf: MWorkflow, a: MAct) -> bool:
        """A pooled attempt its pool has not admitted (read on the tables: admission
        changes no state)."""
        if wf.defn.activity(a.name).pool is None:
            return False
        row = self.wb.store.get_activity(self._aeid(wf, a))
        return row is not None and row.pool_slot is None

    @precondition(lambda self: self._claimable())
    @rule(pick=st.integers(0, 99), by_claim=st.booleans())
    def claim(self, pick: int, by_claim: bool) -> None:
        cands = self._claimable()
        wf, a = cands[pick % len(cands)]
        if by_claim:  # a worker's claim(): any READY external attempt of the run's workflow
            got = self.wb.claim(workflow_name=wf.defn.name)
            if got is None:  # only attempts the pool holds are left
                assert all(self._held(w, x) for w, x in cands if w.defn is wf.defn), cands
                WAIT_COUNTS["claim: pool full"] = WAIT_COUNTS.get("claim: pool full", 0) + 1
                return
            wf, a = self.model.find(got.activity_exec_id)
            assert (wf, a) in cands, got
        else:
            if self._held(wf, a):  # refused: it waits for its pool
                try:
                    self.wb.transition_activity(self._aeid(wf, a), T.RUNNING)
                except NotAllowedNow:
                    WAIT_COUNTS["pool held a start"] = WAIT_COUNTS.get(
                        "pool held a start", 0) + 1
                    return
                raise AssertionError(f"{self._aeid(wf, a)} started around its pool")
            self.wb.transition_activity(self._aeid(wf, a), T.RUNNING)
        aeid = self._aeid(wf, a)
        assert aeid not in self.handed_out, f"{aeid} handed out twice"
        self.handed_out.add(aeid)
        self.model.move(wf, a, T.RUNNING, self.clock())

    def _losable(self) -> list[tuple[MWorkflow, MAct]]:
        # Not a pooled one: its slot comes back at the sweep's check of the slot, on a
        # schedule of its own the model does not follow (test_crash_points covers it).
        return [(wf, a) for wf, a in self._attempts(A.READY, A.RUNNING, A.CANCELLED_RUNNING)
                if wf.state is W.RUNNING and wf.signal_name(a.name) is None
                and wf.defn.activity(a.name).pool is None]

    @rule(slots=st.sampled_from([0, 1, 2]))
    def resize_pool(self, slots: int) -> None:
        """Issue 31: an operator raises or lowers the pool (0 closes it). Lowered below
        the slots held, it admits nothing until they are below the new limit."""
        self.before = set(self._live_holders())
        self.wb.set_pool(self.pool, slots=slots, per_second=None)
        self.slots = slots
        WAIT_COUNTS[f"pool resized to {slots}"] = WAIT_COUNTS.get(
            f"pool resized to {slots}", 0) + 1

    def _live_holders(self) -> list[str]:
        return [row.activity_exec_id for wf in self.model.wfs.values()
                for row in self.wb.store.list_activities(wf.wx)
                if wf.defn.activity(row.activity_name).pool is not None
                and row.pool_slot is not None and row.state is not None
                and not row.state.is_terminal]

    @precondition(lambda self: self._losable())
    @rule(pick=st.integers(0, 99))
    def lose_row(self, pick: int) -> None:
        """An operator's mistake: a raw DeleteItem of a live attempt's row."""
        cands = self._losable()
        wf, a = cands[pick % len(cands)]
        self.wb.store.tables.client.call("DeleteItem", {
            "TableName": f"{self.prefix}activity_exec",
            "Key": {"workflow_exec_id": {"S": wf.wx},
                    "activity_exec_id": {"S": self._aeid(wf, a)}}})
        self.model.lose(wf, a)
        WAIT_COUNTS["lost rows"] = WAIT_COUNTS.get("lost rows", 0) + 1

    @precondition(lambda self: self._attempts(A.TIMED_OUT, A.LOST))
    @rule(pick=st.integers(0, 99), verb=st.sampled_from([T.COMPLETED, T.FAILED]))
    def late_finish(self, pick: int, verb: Transition) -> None:
        """The attempt the system gave up on finishes after all: kept, never its state."""
        cands = self._attempts(A.TIMED_OUT, A.LOST)
        wf, a = cands[pick % len(cands)]
        aeid = self._aeid(wf, a)
        try:
            self.wb.transition_activity(aeid, verb, output={"late": pick}, error="late")
        except ActivityTimedOut:
            pass
        else:
            raise AssertionError(f"late {verb.value} of {a.state.value} {aeid} was applied")
        got = self.wb.get_activity(aeid)
        assert got.state is a.state
        if verb is T.COMPLETED:
            assert got.late_output == {"late": pick}, got
        else:
            assert got.late_error == "late", got
        WAIT_COUNTS[f"late {a.state.value}"] = WAIT_COUNTS.get(f"late {a.state.value}", 0) + 1

    @precondition(lambda self: self._attempts(A.RUNNING, A.CANCELLED_RUNNING))
    @rule(pick=st.integers(0, 99), verb=st.sampled_from([T.COMPLETED, T.FAILED]))
    def finish(self, pick: int, verb: Transition) -> None:
        cands = self._attempts(A.RUNNING, A.CANCELLED_RUNNING)
        wf, a = cands[pick % len(cands)]
        if self.model.came_late(a, verb, self.clock()):
            with pytest.raises(ActivityTimedOut):
                self.wb.transition_activity(self._aeid(wf, a), verb, output={"n": 1},
                                            error="boom")
            self.model.time_out(wf, a, self.clock())
            WAIT_COUNTS["results past a deadline"] = \
                WAIT_COUNTS.get("results past a deadline", 0) + 1
            return
        self.wb.transition_activity(self._aeid(wf, a), verb, output={"n": 1}, error="boom")
        self.model.move(wf, a, verb, self.clock())

    @precondition(lambda self: self._attempts(A.RUNNING, A.CANCELLED_RUNNING))
    @rule(pick=st.integers(0, 99))
    def heartbeat(self, pick: int) -> None:
        cands = self._attempts(A.RUNNING, A.CANCELLED_RUNNING)
        wf, a = cands[pick % len(cands)]
        if a.deadline is not None and a.deadline <= self.clock():
            # Written past its deadline (within the sweep's grace): it times the attempt
            # out, as a result would (issue 31), instead of reviving it.
            with pytest.raises(ActivityTimedOut):
                self.wb.heartbeat(self._aeid(wf, a))
            self.model.time_out(wf, a, self.clock())
            WAIT_COUNTS["heartbeats past a deadline"] = \
                WAIT_COUNTS.get("heartbeats past a deadline", 0) + 1
            return
        try:
            self.wb.heartbeat(self._aeid(wf, a))
            assert a.state is A.RUNNING
        except ActivityCancelled:
            assert a.state is A.CANCELLED_RUNNING
        self.model.heartbeat(wf, a, self.clock())

    @precondition(lambda self: self.model.wfs)
    @rule(pick=st.integers(0, 99))
    def cancel_workflow(self, pick: int) -> None:
        wf = list(self.model.wfs.values())[pick % len(self.model.wfs)]
        if wf.state.is_terminal and wf.state is not W.CANCELLED:
            with pytest.raises(WorkflowAlreadyEnded):  # issue 31: said, not silent
                self.wb.cancel_workflow(wf.wx)
            return
        self.wb.cancel_workflow(wf.wx)
        self.model.cancel(wf)

    @precondition(lambda self: self._attempts(A.REQUESTED, A.READY, A.RUNNING))
    @rule(pick=st.integers(0, 99))
    def cancel_activity(self, pick: int) -> None:
        cands = self._attempts(A.REQUESTED, A.READY, A.RUNNING)
        wf, a = cands[pick % len(cands)]
        self.wb.transition_activity(self._aeid(wf, a), T.CANCEL)
        self.model.move(wf, a, T.CANCEL, self.clock())

    @precondition(lambda self: self.model.wfs)
    @rule(pick=st.integers(0, 99), verb=st.sampled_from(list(Transition)))
    def illegal_move(self, pick: int, verb: Transition) -> None:
        cands = [(wf, a) for wf, a in self._attempts() if (a.state, verb)
                 not in ACTIVITY_TRANSITIONS]
        if not cands:
            return
        wf, a = cands[pick % len(cands)]
        try:
            self.wb.transition_activity(self._aeid(wf, a), verb)
        except (IllegalTransition, StateConflict):
            pass
        except ActivityTimedOut:  # a late report: kept as late output, never the state
            assert a.state in (A.TIMED_OUT, A.LOST) and verb in (T.COMPLETED, T.FAILED)
        else:
            raise AssertionError(f"{verb.value} from {a.state.value} was accepted")

    @precondition(lambda self: self.model.wfs)
    @rule(pick=st.integers(0, 999), verb=st.sampled_from(list(Transition)))
    def outside_move(self, pick: int, verb: Transition) -> None:
        """Any move, on any attempt, at any moment, by a caller outside the engine (the
        Full Logic API a user calls by hand, as a Simple API row would)."""
        cands = self._attempts()
        if not cands:
            return  # every attempt's row is lost until its visit: nothing to move
        wf, a = cands[pick % len(cands)]
        allowed = self.model.allows(wf, a, verb)
        target = ACTIVITY_TRANSITIONS.get((a.state, verb))
        if allowed and target in (A.READY, A.QUEUED, A.PREPARING, A.RUNNING) \
                and self._held(wf, a):
            allowed = False  # the pool holds it: only the engine starts it
        try:
            self.wb.transition_activity(self._aeid(wf, a), verb, output={"o": 1}, error="e")
        except (IllegalTransition, StateConflict, NotAllowedNow) as exc:
            assert not allowed, f"{verb.value} on {a.state.value} refused: {exc}"
            return
        except ActivityTimedOut:  # a late report: kept as late output, never the state
            if allowed and self.model.came_late(a, verb, self.clock()):
                self.model.time_out(wf, a, self.clock())  # written past its deadline
                WAIT_COUNTS["results past a deadline"] = \
                    WAIT_COUNTS.get("results past a deadline", 0) + 1
                return
            assert a.state in (A.TIMED_OUT, A.LOST) and verb in (T.COMPLETED, T.FAILED)
            return
        assert allowed, f"{verb.value} on {a.state.value} ({wf.state.value}) was accepted"
        assert not self.model.came_late(a, verb, self.clock()), f"late {verb.value} applied"
        self.model.move(wf, a, verb, self.clock())

    @precondition(lambda self: self.model.wfs)
    @rule(pick=st.integers(0, 99), which=st.integers(0, 9), n=st.integers(0, 2))
    def signal(self, pick: int, which: int, n: int) -> None:
        """A signal, mostly of a name the run waits for (ids from a small pool: resends
        and duplicates happen)."""
        wf = list(self.model.wfs.values())[pick % len(self.model.wfs)]
        names = sorted({s for s in map(wf.signal_name, wf.defn.names) if s}) or ["nobody"]
        name = "nobody" if which == 9 else names[which % len(names)]
        expected = self.model.signal(wf, name, f"{name}-{n}", self.clock())
        WAIT_COUNTS[f"signal {expected}"] = WAIT_COUNTS.get(f"signal {expected}", 0) + 1
        try:
            self.wb.signal(wf.wx, name, {"id": f"{name}-{n}"}, signal_id=f"{name}-{n}")
        except InvalidInput:
            assert expected == "invalid", expected
        except SignalRefused:
            assert expected == "refused", expected
        else:
            assert expected in ("received", "kept", "duplicate"), expected

    @precondition(lambda self: self.model.wfs)
    @rule(pick=st.integers(0, 99), resume=st.booleans())
    def suspend_or_resume(self, pick: int, resume: bool) -> None:
        """Mostly a suspend of a RUNNING run or a resume of a SUSPENDED one; any run when
        none is."""
        wanted = W.SUSPENDED if resume else W.RUNNING
        cands = [w for w in self.model.wfs.values() if w.state is wanted] \
            or list(self.model.wfs.values())
        wf = cands[pick % len(cands)]
        key = f"{'resume' if resume else 'suspend'} {wf.state.value}"
        WAIT_COUNTS[key] = WAIT_COUNTS.get(key, 0) + 1
        if not resume:
            allowed = self.model.suspend(wf)
            try:
                self.wb.suspend_workflow(wf.wx)
            except NotAllowedNow:
                assert not allowed
            else:
                assert allowed
            return
        before = deepcopy(wf)
        try:
            self.wb.resume_workflow(wf.wx)
        except NotAllowedNow:
            assert before.state not in (W.RUNNING, W.SUSPENDED)
            return
        assert self.model.resume(wf)
        # The resume is a reconcile visit (lost rows become LOST), then it fires what
        # fell due while the run was suspended.
        self.model.visit(wf, self.clock())
        self._match_sweep(wf.wx, deepcopy(self.model.wfs[wf.wx]), self.clock())

    @rule(seconds=st.sampled_from([5.0, 31.0, 60.0, 130.0, 400.0]))
    def advance_and_sweep(self, seconds: float) -> None:
        now = self.clock.advance(seconds)
        before = deepcopy(self.model)
        # Runs with a lost row whose reconcile visit (the engine's schedule) is due now.
        visits = [wx for wx, wf in before.wfs.items()
                  if any(a.lost for a in wf.acts) and self._visit_due(wx, now)]
        report = self.wb.sweep(now)
        assert report.errors == []
        for wx, wf in before.wfs.items():
            self._match_sweep(wx, wf, now, visit=wx in visits)

    def _visit_due(self, wx: str, now: float) -> bool:
        run = self.wb.store.get_workflow(wx)
        return run is not None and run.check_epoch is not None and run.check_epoch <= now

    def _match_sweep(self, wx: str, wf: MWorkflow, now: float, *, visit: bool = False) -> None:
        """Adopt the order of firing ``wf``'s due deadlines whose outcome is the tables'
        (then, with ``visit``, its reconcile visit: lost rows become LOST)."""
        due = [a for a in wf.acts if (d := a.due_at()) is not None and d <= now]
        actual = self._actual(wx)
        tried = []
        for order in itertools.permutations(range(len(due))):
            trial = deepcopy(wf)
            m = Model()
            m.wfs[wx] = trial
            m.sweep_workflow(trial, [trial.acts[wf.acts.index(due[i])] for i in order], now)
            if visit:
                m.visit(trial, now)
            tried.append(m.snapshot(wx))
            if tried[-1] == actual:
                self.model.wfs[wx] = trial
                return
        raise AssertionError(f"sweep of {wx}: tables {actual}, model allows {tried}")

    # -- checks -----------------------------------------------------------------------
    def _actual(self, wx: str) -> tuple[str, dict[str, str]]:
        wf = self.wb.get_workflow(wx)
        return wf.state.value, {a.activity_exec_id: a.state.value for a in wf.activities}

    @invariant()
    def ended_runs_are_clean(self) -> None:
        """Whatever outside callers did: a COMPLETED run has every latest attempt
        COMPLETED, and no ended run has an activity RUNNING (checked on the tables, not
        on the model)."""
        for wx in self.model.wfs:
            wf = self.wb.get_workflow(wx)
            if wf.state is W.COMPLETED:
                assert {a.state for a in wf.latest_activities.values()} == {A.COMPLETED}, wf
            if wf.state.is_terminal:
                assert all(a.state is not A.RUNNING for a in wf.activities), wf

    @invariant()
    def the_pool_holds_one(self) -> None:
        """The example's pool, on the tables: at most its limit of live attempts hold it
        (more only of those that held it when it was lowered: issue 31); nothing is
        claimable or running without its slot; a slot's holder is a live attempt that
        records it, or one that ended (its release follows the end's write, or it timed
        out while its code may still run)."""
        live: dict[str, list[str]] = {name: [] for name in self._pools()}
        waiting = 0
        for wf in self.model.wfs.values():
            for row in self.wb.store.list_activities(wf.wx):
                if wf.defn.activity(row.activity_name).pool is None or row.state is None:
                    continue
                waiting += row.state is A.READY and row.pool_slot is None
                if row.claim_key is not None or row.state in (A.RUNNING, A.QUEUED,
                                                              A.PREPARING):
                    assert row.pool_slot is not None, f"started around its pool: {row}"
                if row.pool_slot is not None and not row.state.is_terminal:
                    pool, k = parse_slot_ref(row.pool_slot)
                    assert pool in live and k in (0, 1), row
                    live[pool].append(row.activity_exec_id)
        for pool, holders in live.items():  # each key to its own limit
            assert len(holders) <= self.slots or set(holders) <= self.before, \
                f"{holders} hold {pool} of {self.slots} slot(s) (held by {self.before} when set)"
        if self.keyed:  # (printed with the figures: the keys were exercised)
            held_keys = sum(1 for h in live.values() if h)
            if held_keys:
                tag = f"keyed pool: {held_keys} key(s) held"
                WAIT_COUNTS[tag] = WAIT_COUNTS.get(tag, 0) + 1
        if any(live.values()) and waiting:  # (printed with the figures: the pool was exercised)
            WAIT_COUNTS["pool: steps with a waiter"] = WAIT_COUNTS.get(
                "pool: steps with a waiter", 0) + 1
        for pool, holders in live.items():
            for slot in (self.wb.store.pools.get_slot(pool, k) for k in (0, 1)):
                if slot.holder is None or slot.holder in holders:
                    if slot.holder is not None:
                        row = self.wb.store.get_activity(slot.holder)
                        assert row is not None and row.pool_slot == f"{pool}#{slot.k}", \
                            (slot, row)
                    continue
                row = self.wb.store.get_activity(slot.holder)
                assert row is None or row.state is None or row.state.is_terminal \
                    or row.pool_slot is None, (slot, row)
            held = {s.holder for s in (self.wb.store.pools.get_slot(pool, k) for k in (0, 1))}
            assert set(holders) <= held, (holders, held)  # every live holder's slot says so

    def _pools(self) -> list[str]:
        """The pools this example's attempts take: its pool, or its two keys'."""
        return [keyed_pool(self.pool, k) for k in ("k0", "k1")] if self.keyed \
            else [self.pool]

    @invariant()
    def no_attempt_id_comes_back(self) -> None:
        """An attempt id handed out and then lost is LOST for good (or still missing,
        until its visit): never READY or running again."""
        for wf in self.model.wfs.values():
            for a in wf.acts:
                aeid = self._aeid(wf, a)
                if aeid in self.handed_out and (a.lost or a.state is A.LOST):
                    row = self.wb.store.get_activity(aeid)
                    assert row is None or row.state is A.LOST, row

    @invariant()
    def tables_match_the_model(self) -> None:
        COUNTS["steps"] += 1
        for wx, mwf in self.model.wfs.items():
            assert self._actual(wx) == self.model.snapshot(wx)
            wf = self.wb.get_workflow(wx)
            assert_contract_holds(wf, mwf.defn)
            # Each wait received the signal the model says, and no signal completed two.
            got = {a.activity_exec_id: a.output["id"] for a in wf.activities
                   if a.state is A.COMPLETED and mwf.signal_name(a.activity_name)}
            assert got == {self._aeid(mwf, a): a.signal for a in mwf.acts if a.signal}
            assert len(set(got.values())) == len(got)


def run_machine(machine: type[WorkflowMachine], endpoint: str, prefix: str,
                examples: int, steps: int) -> None:
    """Run ``machine`` on fresh tables, derandomized (a failure replays as it was);
    ``endpoint`` ``"memory"``: on one in-memory twin."""
    machine.twin = MemoryDynamoDB() if endpoint == "memory" else None
    if machine.twin is not None:
        endpoint = ""
    Whimbrel(endpoint_url=endpoint or None, table_prefix=prefix,
             transport=machine.twin).create_tables()
    machine.endpoint, machine.prefix = endpoint, prefix
    run_state_machine_as_test(machine, settings=settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, derandomize=True,
        phases=PHASES,
        database=None, suppress_health_check=list(HealthCheck)))


@pytest.mark.twin
def test_engine_matches_the_contract_model_in_memory(table_prefix: str) -> None:
    run_machine(WorkflowMachine, "memory", table_prefix, EXAMPLES, STEPS)
    print(f"\nmodel test (twin): {COUNTS['examples']} examples, {COUNTS['steps']} checked "
          f"steps; waits: {dict(sorted(WAIT_COUNTS.items()))}")


@pytest.mark.slow
def test_engine_matches_the_contract_model(ddb_endpoint: str, table_prefix: str) -> None:
    run_machine(WorkflowMachine, ddb_endpoint, table_prefix, EXAMPLES, STEPS)
    print(f"\nmodel test: {COUNTS['examples']} examples, {COUNTS['steps']} checked steps; "
          f"waits: {dict(sorted(WAIT_COUNTS.items()))}")
