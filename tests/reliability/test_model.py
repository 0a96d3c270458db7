"""Model-based test (issue 5, part 4): a Hypothesis state machine drives random
workflows against DynamoDB Local and compares every activity attempt and workflow state
with a pure model of the contract after every step.

The model knows the engine's policies (retries with a not-before time, settling a
failing or cancelled workflow, time-outs by the sweep). The only freedom it allows the
engine is the order in which one sweep fires several due timers of one workflow: it
accepts any order whose outcome matches.
"""

from __future__ import annotations

import itertools
import os
from copy import deepcopy
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, settings
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
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.contract.errors import (
    ActivityCancelled,
    IllegalTransition,
    NotAllowedNow,
    StateConflict,
)
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.contract.states import (
    ACTIVITY_TRANSITIONS,
    ActivityState,
    Transition,
    WorkflowState,
)
from whimbrel.testing import StepClock, assert_contract_holds

A, W, T = ActivityState, WorkflowState, Transition
#: ActivityDefinition's default launch guard: a QUEUED/PREPARING attempt that does not
#: reach RUNNING within it is TIMED_OUT by the sweep.
START_TIMEOUT = 300.0
EXAMPLES = int(os.environ.get("WHIMBREL_MODEL_EXAMPLES", "12"))
STEPS = int(os.environ.get("WHIMBREL_MODEL_STEPS", "20"))
COUNTS = {"examples": 0, "steps": 0}


@dataclass
class MAct:
    name: str
    attempt: int
    state: ActivityState
    deadline: float | None = None  # armed timer: heartbeat deadline or retry not-before


@dataclass
class MWorkflow:
    wx: str
    defn: WorkflowDefinition
    state: WorkflowState = W.RUNNING
    acts: list[MAct] = field(default_factory=list)

    def latest(self, name: str) -> MAct:
        return max((a for a in self.acts if a.name == name), key=lambda a: a.attempt)


class Model:
    """The contract and the engine's policies, with no I/O."""

    def __init__(self) -> None:
        self.wfs: dict[str, MWorkflow] = {}

    def start(self, wx: str, defn: WorkflowDefinition) -> None:
        wf = MWorkflow(wx, defn, acts=[MAct(a.name, 1, A.REQUESTED) for a in defn.activities])
        for a in wf.acts:
            if not defn.activity(a.name).depends_on:
                a.state = A.READY
        self.wfs[wx] = wf

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
        if t is T.TIME_OUT or target is None:
            return False
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

    def heartbeat(self, wf: MWorkflow, a: MAct, now: float) -> None:
        hb = wf.defn.activity(a.name).heartbeat_timeout_seconds
        if hb:
            a.deadline = now + hb

    def after(self, wf: MWorkflow, a: MAct, now: float) -> None:
        if wf.state in (W.FAILED_WAITING, W.CANCEL_REQUESTED):
            self.settle(wf)
            return
        if wf.state is not W.RUNNING:
            return
        defn = wf.defn
        if a.state is A.COMPLETED:
            for dep in defn.dependents(a.name):
                ups = defn.activity(dep).depends_on
                nxt = wf.latest(dep)
                if nxt.state is A.REQUESTED and all(
                        wf.latest(u).state is A.COMPLETED for u in ups):
                    nxt.state = A.READY
            if all(wf.latest(s).state is A.COMPLETED for s in defn.sinks):
                wf.state = W.COMPLETED
        elif a.state in (A.FAILED, A.TIMED_OUT):
            spec = defn.activity(a.name)
            if a.attempt < spec.retry.max_attempts:
                delay = spec.retry.delay_after(a.attempt)
                nxt = MAct(a.name, a.attempt + 1, A.REQUESTED, now + delay)
                wf.acts.append(nxt)
                if delay <= 0:
                    nxt.state, nxt.deadline = A.READY, None
            else:
                self.fail(wf)
        else:
            self.fail(wf)

    def fail(self, wf: MWorkflow) -> None:
        if wf.state in (W.RUNNING, W.REQUESTED):
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
            if a.state.is_terminal:
                continue
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
            if a.deadline is None or a.deadline > now:
                continue
            if a.state in (A.RUNNING, A.CANCELLED_RUNNING, A.READY, A.QUEUED, A.PREPARING):
                a.state, a.deadline = A.TIMED_OUT, None
                self.after(wf, a, now)
            elif a.state is A.REQUESTED:
                a.deadline = None
                if wf.state is W.RUNNING:
                    self.launch_due(wf, a)
                else:
                    a.state = A.CANCELLED
                    self.settle(wf)

    def launch_due(self, wf: MWorkflow, a: MAct) -> None:
        """A retry whose back-off passed, in a RUNNING run, is launched (external: READY)."""
        a.state = A.READY

    def snapshot(self, wx: str) -> tuple[str, dict[str, str]]:
        wf = self.wfs[wx]
        return wf.state.value, {activity_exec_id(wx, a.name, a.attempt): a.state.value
                                for a in wf.acts}


def dags() -> st.SearchStrategy[list[tuple[list[int], float | None, int, float]]]:
    node = st.tuples(st.lists(st.integers(0, 3), max_size=2, unique=True),
                     st.sampled_from([None, 30.0]), st.integers(1, 2),
                     st.sampled_from([0.0, 50.0]))
    return st.lists(node, min_size=1, max_size=4)


class WorkflowMachine(RuleBasedStateMachine):
    endpoint: str = ""
    prefix: str = ""

    def __init__(self) -> None:
        super().__init__()
        COUNTS["examples"] += 1
        self.clock = StepClock()
        self.wb = Whimbrel(endpoint_url=self.endpoint, table_prefix=self.prefix,
                           clock=self.clock, max_workers=1)
        self.model = Model()
        self.defs = 0

    def teardown(self) -> None:
        self.wb.close()

    # -- helpers ----------------------------------------------------------------------
    def _attempts(self, *states: ActivityState) -> list[tuple[MWorkflow, MAct]]:
        return [(wf, a) for wf in self.model.wfs.values() for a in wf.acts
                if not states or a.state in states]

    def _aeid(self, wf: MWorkflow, a: MAct) -> str:
        return activity_exec_id(wf.wx, a.name, a.attempt)

    # -- rules ------------------------------------------------------------------------
    @precondition(lambda self: len(self.model.wfs) < 3)
    @rule(shape=dags())
    def start(self, shape: list[tuple[list[int], float | None, int, float]]) -> None:
        self.defs += 1
        acts = []
        for i, (deps, hb, attempts, interval) in enumerate(shape):
            acts.append(ActivityDefinition(
                f"N{i}", tuple(sorted({f"N{d}" for d in deps if d < i})),
                launcher=LauncherSpec.external(), heartbeat_timeout_seconds=hb,
                retry=RetryPolicy(max_attempts=attempts, initial_interval_seconds=interval)))
        defn = WorkflowDefinition(f"m{COUNTS['examples']}-{self.defs}", tuple(acts))
        self.wb.register_workflow(defn)
        request = f"{defn.name}-req"
        wx = self.wb.start_workflow(defn.name, {"i": self.defs}, request_id=request)
        assert wx == workflow_exec_id_for(request)
        self.model.start(wx, defn)
        # Starting again with the same request id changes nothing.
        assert self.wb.start_workflow(defn.name, {"i": self.defs}, request_id=request) == wx

    @precondition(lambda self: self._attempts(A.READY))
    @rule(pick=st.integers(0, 99))
    def claim(self, pick: int) -> None:
        cands = self._attempts(A.READY)
        wf, a = cands[pick % len(cands)]
        self.wb.transition_activity(self._aeid(wf, a), T.RUNNING)
        self.model.move(wf, a, T.RUNNING, self.clock())

    @precondition(lambda self: self._attempts(A.RUNNING, A.CANCELLED_RUNNING))
    @rule(pick=st.integers(0, 99), verb=st.sampled_from([T.COMPLETED, T.FAILED]))
    def finish(self, pick: int, verb: Transition) -> None:
        cands = self._attempts(A.RUNNING, A.CANCELLED_RUNNING)
        wf, a = cands[pick % len(cands)]
        self.wb.transition_activity(self._aeid(wf, a), verb, output={"n": 1}, error="boom")
        self.model.move(wf, a, verb, self.clock())

    @precondition(lambda self: self._attempts(A.RUNNING, A.CANCELLED_RUNNING))
    @rule(pick=st.integers(0, 99))
    def heartbeat(self, pick: int) -> None:
        cands = self._attempts(A.RUNNING, A.CANCELLED_RUNNING)
        wf, a = cands[pick % len(cands)]
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
        else:
            raise AssertionError(f"{verb.value} from {a.state.value} was accepted")

    @precondition(lambda self: self.model.wfs)
    @rule(pick=st.integers(0, 999), verb=st.sampled_from(list(Transition)))
    def outside_move(self, pick: int, verb: Transition) -> None:
        """Any move, on any attempt, at any moment, by a caller outside the engine (the
        Full Logic API a user calls by hand, as a Simple API row would)."""
        cands = self._attempts()
        wf, a = cands[pick % len(cands)]
        allowed = self.model.allows(wf, a, verb)
        try:
            self.wb.transition_activity(self._aeid(wf, a), verb, output={"o": 1}, error="e")
        except (IllegalTransition, StateConflict, NotAllowedNow) as exc:
            assert not allowed, f"{verb.value} on {a.state.value} refused: {exc}"
            return
        assert allowed, f"{verb.value} on {a.state.value} ({wf.state.value}) was accepted"
        self.model.move(wf, a, verb, self.clock())

    @rule(seconds=st.sampled_from([5.0, 31.0, 60.0, 130.0, 400.0]))
    def advance_and_sweep(self, seconds: float) -> None:
        now = self.clock.advance(seconds)
        before = deepcopy(self.model)
        report = self.wb.sweep(now)
        assert report.errors == []
        for wx, wf in before.wfs.items():
            due = [a for a in wf.acts if a.deadline is not None and a.deadline <= now]
            actual = self._actual(wx)
            tried = []
            for order in itertools.permutations(range(len(due))):
                trial = deepcopy(wf)
                m = Model()
                m.wfs[wx] = trial
                m.sweep_workflow(trial, [trial.acts[wf.acts.index(due[i])] for i in order], now)
                tried.append(m.snapshot(wx))
                if tried[-1] == actual:
                    self.model.wfs[wx] = trial
                    break
            else:
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
    def tables_match_the_model(self) -> None:
        COUNTS["steps"] += 1
        for wx, mwf in self.model.wfs.items():
            assert self._actual(wx) == self.model.snapshot(wx)
            assert_contract_holds(self.wb.get_workflow(wx), mwf.defn)


def run_machine(machine: type[WorkflowMachine], endpoint: str, prefix: str,
                examples: int, steps: int) -> None:
    """Run ``machine`` on fresh tables, derandomized (a failure replays as it was)."""
    Whimbrel(endpoint_url=endpoint, table_prefix=prefix).create_tables()
    machine.endpoint, machine.prefix = endpoint, prefix
    run_state_machine_as_test(machine, settings=settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, derandomize=True,
        database=None, suppress_health_check=list(HealthCheck)))


@pytest.mark.slow
def test_engine_matches_the_contract_model(ddb_endpoint: str, table_prefix: str) -> None:
    run_machine(WorkflowMachine, ddb_endpoint, table_prefix, EXAMPLES, STEPS)
    print(f"\nmodel test: {COUNTS['examples']} examples, {COUNTS['steps']} checked steps")
