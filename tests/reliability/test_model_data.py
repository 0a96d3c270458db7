"""Model-based test of data-driven workflows (issue 14): the Hypothesis machine of
``test_model.py``, its DAGs now holding maps (``map_over`` the input, external items in
lanes), activities that ``continue`` past their failure and child runs, with a rule that
redrives ended runs. After every step every attempt and run on the tables (items and
child runs included) must equal the pure model's.
"""

from __future__ import annotations

import itertools
import os
from copy import deepcopy
from dataclasses import dataclass, field

import pytest
import test_model as base
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from whimbrel import (
    ActivityDefinition,
    EngineDriven,
    LauncherSpec,
    RedriveNotAllowed,
    RetryPolicy,
    WorkflowDefinition,
)
from whimbrel.contract.dataflow import CONTINUE, child_request_id, item_name, split_item
from whimbrel.contract.ids import activity_exec_id, workflow_exec_id_for
from whimbrel.contract.states import ACTIVITY_TRANSITIONS, ActivityState, Transition
from whimbrel.contract.states import WorkflowState as W
from whimbrel.testing import StepClock, assert_contract_holds

A, T = ActivityState, Transition
EXT = LauncherSpec.external()
EXAMPLES = int(os.environ.get("WHIMBREL_MODEL_EXAMPLES", "10"))
STEPS = int(os.environ.get("WHIMBREL_MODEL_STEPS", "20"))
COUNTS = {"examples": 0, "steps": 0, "redrives": 0, "items": 0, "children": 0,
          "adoptions": 0}
#: The child workflow every child node starts: one external activity, no retry.
KID = WorkflowDefinition("kid", (ActivityDefinition("K", launcher=EXT),))
MAX_ORDERS = 720


@dataclass
class DAct(base.MAct):
    base: int = 0  # attempts before this generation's first
    gen: int = 0
    #: A redrive's attempt of a child node that adopted the ended child run before it.
    child: str | None = None


@dataclass
class DWorkflow(base.MWorkflow):
    xs: list[int] = field(default_factory=list)
    redrives: int = 0
    #: A child run: (parent wx, the parent attempt's id).
    parent: tuple[str, str] | None = None


class DataModel(base.Model):
    """The contract, the engine's policies and issue 14's, with no I/O."""

    wfs: dict[str, DWorkflow]  # type: ignore[assignment]

    def __init__(self, clock: StepClock) -> None:
        super().__init__()
        self.clock = clock  # a failure's time: its retry's back-off counts from it

    # -- shape ---------------------------------------------------------------------------
    @staticmethod
    def kind(wf: DWorkflow, name: str) -> str:
        if split_item(name)[1] is not None:
            return "item"
        spec = wf.defn.activity(name)
        return "map" if spec.map_over else "child" if spec.launcher.kind == "workflow" \
            else "plain"

    def latest_of(self, wf: DWorkflow, name: str) -> DAct | None:
        mine = [a for a in wf.acts if a.name == name]
        return max(mine, key=lambda a: a.attempt) if mine else None  # type: ignore[return-value]

    def for_good(self, wf: DWorkflow, a: DAct) -> bool:
        spec = wf.defn.activity(a.name)
        return a.state in (A.FAILED, A.TIMED_OUT) and \
            a.attempt - a.base >= spec.retry.max_attempts

    def resolved(self, wf: DWorkflow, name: str) -> bool:
        a = self.latest_of(wf, name)
        if a is None:
            return False
        return a.state is A.COMPLETED or (
            self.for_good(wf, a) and wf.defn.activity(name).on_failure == CONTINUE)

    def deps_resolved(self, wf: DWorkflow, name: str) -> bool:
        return all(self.resolved(wf, d) for d in wf.defn.activity(name).depends_on)

    # -- start ---------------------------------------------------------------------------
    def start(self, wx: str, defn: WorkflowDefinition, xs: list[int] | None = None,
              parent: tuple[str, str] | None = None) -> None:
        wf = DWorkflow(wx, defn, xs=list(xs or []), parent=parent,
                       acts=[DAct(a.name, 1, A.REQUESTED) for a in defn.activities])
        self.wfs[wx] = wf
        for root in defn.roots:
            self.advance(wf, self.latest_of(wf, root))  # type: ignore[arg-type]

    def advance(self, wf: DWorkflow, a: DAct) -> None:
        """A REQUESTED attempt whose upstreams resolved, in a RUNNING run, moves on."""
        if a.state is not A.REQUESTED or wf.state is not W.RUNNING:
            return
        a.deadline = None
        kind = self.kind(wf, a.name)
        if kind == "map":
            self.expand(wf, a)
        elif kind == "child":
            a.state = A.RUNNING
            if a.child is not None:  # adopted in a redrive: redriven in place
                self.adopt(wf, a, self.wfs[a.child])
                return
            COUNTS["children"] += 1
            self.start(self.child_of(wf, a), KID, parent=(wf.wx, self.aeid(wf, a)))
        else:
            a.state = A.READY

    @staticmethod
    def aeid(wf: DWorkflow, a: DAct) -> str:
        return activity_exec_id(wf.wx, a.name, a.attempt)

    # -- maps ----------------------------------------------------------------------------
    def width(self, wf: DWorkflow, name: str) -> int:
        return min(wf.defn.activity(name).max_concurrency or len(wf.xs), len(wf.xs))

    def expand(self, wf: DWorkflow, node: DAct) -> None:
        if not wf.xs:
            node.state = A.COMPLETED
            self.after(wf, node, 0.0)
            return
        node.state = A.RUNNING
        width = self.width(wf, node.name)
        busy = False
        for lane in range(width):
            for j in range(lane, len(wf.xs), width):
                if self.start_item(wf, node.name, j):
                    busy = True
                    break
        if not busy:
            self.finish_map(wf, node)

    def start_item(self, wf: DWorkflow, name: str, index: int) -> bool:
        iname = item_name(name, index)
        last = self.latest_of(wf, iname)
        if last is not None and last.state is A.COMPLETED:
            return False
        COUNTS["items"] += 1
        if last is None:
            last = DAct(iname, 1, A.REQUESTED, gen=wf.redrives)
            wf.acts.append(last)
        elif last.gen < wf.redrives:
            last = DAct(iname, last.attempt + 1, A.REQUESTED, base=last.attempt,
                        gen=wf.redrives)
            wf.acts.append(last)
        self.advance(wf, last)
        return True

    def item_after(self, wf: DWorkflow, a: DAct, now: float) -> None:
        name, index = split_item(a.name)
        assert index is not None
        node = self.latest_of(wf, name)
        assert node is not None
        if a.state in (A.FAILED, A.TIMED_OUT) and not self.for_good(wf, a):
            self.retry(wf, a, now)
        elif a.state is not A.COMPLETED:
            self.fail_map(wf, node)
        else:
            width = self.width(wf, name)
            j = index + width
            while j < len(wf.xs):
                if self.start_item(wf, name, j):
                    return
                j += width
            if all(self.resolved(wf, item_name(name, i)) for i in range(len(wf.xs))):
                self.finish_map(wf, node)

    def finish_map(self, wf: DWorkflow, node: DAct) -> None:
        if node.state is A.RUNNING:
            node.state = A.COMPLETED
            self.after(wf, node, 0.0)

    def fail_map(self, wf: DWorkflow, node: DAct) -> None:
        if node.state is not A.RUNNING:
            return
        node.state = A.FAILED
        for it in wf.acts:
            if split_item(it.name)[0] == node.name and split_item(it.name)[1] is not None:
                self.stop(wf, it, ask=True)
        self.fail(wf)

    # -- moves ---------------------------------------------------------------------------
    def allows(self, wf: base.MWorkflow, a: base.MAct, t: Transition) -> bool:
        assert isinstance(wf, DWorkflow)
        if self.kind(wf, a.name) in ("map", "child"):
            return False  # EngineDriven
        target = ACTIVITY_TRANSITIONS.get((a.state, t))
        if t in (T.TIME_OUT, T.SKIP) or target is None:
            return False  # the listener's and the engine's moves
        if a.state is A.REQUESTED and target in (A.READY, A.QUEUED) \
                and not self.deps_resolved(wf, a.name):
            return False
        return not (target in (A.QUEUED, A.PREPARING, A.RUNNING) and wf.state is not W.RUNNING)

    def retry(self, wf: DWorkflow, a: DAct, now: float) -> None:
        spec = wf.defn.activity(a.name)
        delay = spec.retry.delay_after(a.attempt)
        nxt = DAct(a.name, a.attempt + 1, A.REQUESTED, self.clock() + delay, base=a.base,
                   gen=wf.redrives)
        wf.acts.append(nxt)
        if delay <= 0:
            self.advance(wf, nxt)

    def after(self, wf: base.MWorkflow, a: base.MAct, now: float) -> None:
        assert isinstance(wf, DWorkflow) and isinstance(a, DAct)
        if wf.state in (W.FAILED_WAITING, W.CANCEL_REQUESTED):
            self.settle(wf)
            return
        if wf.state is not W.RUNNING:
            return
        if self.kind(wf, a.name) == "item":
            self.item_after(wf, a, now)
            return
        if a.gen < wf.redrives and a.state is not A.COMPLETED:
            return  # from before the redrive: its activity has a new attempt
        spec = wf.defn.activity(a.name)
        if a.state in (A.FAILED, A.TIMED_OUT) and not self.for_good(wf, a) \
                and self.kind(wf, a.name) != "map":
            self.retry(wf, a, now)
        elif a.state is A.COMPLETED or (self.for_good(wf, a) and spec.on_failure == CONTINUE):
            self.resolve(wf, a.name)
        elif a.state is A.CANCELLED:  # cancelled alone: the run is cancelled (issue 20)
            self.cancel(wf)
        else:
            self.fail(wf)

    def resolve(self, wf: DWorkflow, name: str) -> None:
        for dep in wf.defn.dependents(name):
            nxt = self.latest_of(wf, dep)
            if nxt is not None and self.deps_resolved(wf, dep):
                self.advance(wf, nxt)
        if name in wf.defn.sinks and all(self.resolved(wf, s) for s in wf.defn.sinks):
            self.end(wf, W.COMPLETED)

    def end(self, wf: DWorkflow, state: W) -> None:
        wf.state = state
        if wf.parent is None:
            return
        pwf = self.wfs[wf.parent[0]]
        node = next(a for a in pwf.acts if self.aeid(pwf, a) == wf.parent[1])
        if node.state is A.RUNNING:
            node.state = A.COMPLETED if state is W.COMPLETED else A.FAILED
        elif node.state is A.CANCELLED_RUNNING:
            node.state = A.CANCELLED
        else:
            return
        self.after(pwf, node, 0.0)

    def fail(self, wf: base.MWorkflow) -> None:
        if wf.state in (W.RUNNING, W.REQUESTED):
            wf.state = W.FAILED_WAITING
        self.settle(wf)

    def stop(self, wf: DWorkflow, a: DAct, *, ask: bool) -> bool:
        """The engine's stop_activity: True while the attempt may still run."""
        if a.state.is_terminal or a.lost:
            return False  # a vanished row runs nothing the engine can see (as the base model)
        kind = self.kind(wf, a.name)
        if kind == "map" and a.state is A.RUNNING:
            a.state, a.deadline = A.CANCELLED, None
            return False
        if a.state is A.CANCELLED_RUNNING or (a.state is A.RUNNING and not ask):
            still = True
        elif a.state is A.RUNNING:
            a.state, still = A.CANCELLED_RUNNING, True
        else:
            a.state, a.deadline, still = A.CANCELLED, None, False
        if still and ask and kind in ("child", "item") and \
                wf.defn.activity(a.name).launcher.kind == "workflow":
            self.cancel_child(wf, a)
        return still

    def cancel_child(self, wf: DWorkflow, a: DAct) -> None:
        child = self.wfs.get(self.child_of(wf, a))
        if child is not None and child.state in (W.REQUESTED, W.RUNNING, W.FAILED_WAITING):
            self.cancel(child)

    def cancel(self, wf: base.MWorkflow) -> None:
        if wf.state is not W.CANCEL_REQUESTED and not wf.state.is_terminal:
            wf.state = W.CANCEL_REQUESTED
        self.settle(wf)

    def settle(self, wf: base.MWorkflow) -> None:
        assert isinstance(wf, DWorkflow)
        if wf.state not in (W.FAILED_WAITING, W.CANCEL_REQUESTED):
            return
        cancelling = wf.state is W.CANCEL_REQUESTED
        # The engine lists the run's attempts in the order of their ids.
        order = sorted(wf.acts, key=lambda a: self.aeid(wf, a))
        active = [self.stop(wf, a, ask=cancelling) for a in order]
        if not any(active) and wf.state in (W.FAILED_WAITING, W.CANCEL_REQUESTED):
            self.end(wf, W.CANCELLED if cancelling else W.FAILED)

    def launch_due(self, wf: base.MWorkflow, a: base.MAct, now: float) -> None:
        assert isinstance(wf, DWorkflow) and isinstance(a, DAct)
        a.state = A.REQUESTED
        self.advance(wf, a)  # an item's or a child attempt's retry, like any other

    # -- child runs ----------------------------------------------------------------------
    def child_of(self, wf: DWorkflow, a: DAct) -> str:
        """The child run of a child node's attempt: adopted, or derived from its id."""
        return a.child or workflow_exec_id_for(child_request_id(self.aeid(wf, a)))

    def adoptable(self, wf: DWorkflow, before: DAct) -> str | None:
        """The child a redrive's first attempt of a child node takes over from the attempt
        before it: one that ended and still points at that attempt (engine/children.py)."""
        if self.kind(wf, before.name) != "child":
            return None
        child = self.wfs.get(self.child_of(wf, before))
        if child is None or child.parent != (wf.wx, self.aeid(wf, before)) \
                or child.state not in (W.FAILED, W.CANCELLED, W.TIMED_OUT, W.COMPLETED):
            return None
        return child.wx

    def adopt(self, wf: DWorkflow, a: DAct, child: DWorkflow) -> None:
        """Point the child at its new attempt; redrive it in place, or hand on what it
        completed with."""
        child.parent = (wf.wx, self.aeid(wf, a))
        COUNTS["adoptions"] += 1
        if child.state is W.COMPLETED:
            self.end(child, W.COMPLETED)
        else:
            self.redrive(child)

    # -- redrive -------------------------------------------------------------------------
    def redrive(self, wf: DWorkflow) -> None:
        wf.state, wf.redrives = W.RUNNING, wf.redrives + 1
        todo = [n for n in wf.defn.topological_order() if not self.resolved(wf, n)]
        fresh = []
        for name in todo:
            last = self.latest_of(wf, name)
            assert last is not None
            nxt = DAct(name, last.attempt + 1, A.REQUESTED, base=last.attempt,
                       gen=wf.redrives, child=self.adoptable(wf, last))
            wf.acts.append(nxt)
            fresh.append(nxt)
        for nxt in fresh:
            if self.deps_resolved(wf, nxt.name):
                self.advance(wf, nxt)
        if not fresh and all(self.resolved(wf, s) for s in wf.defn.sinks):
            self.end(wf, W.COMPLETED)


Node = tuple[list[int], float | None, int, float, str]


def data_dags() -> st.SearchStrategy[list[Node]]:
    node = st.tuples(st.lists(st.integers(0, 3), max_size=2, unique=True),
                     st.sampled_from([None, 30.0]), st.integers(1, 2),
                     st.sampled_from([0.0, 50.0]),
                     st.sampled_from(["plain", "continue", "map1", "map2", "child"]))
    return st.lists(node, min_size=1, max_size=4)


class DataMachine(base.WorkflowMachine):
    model: DataModel  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        COUNTS["examples"] += 1
        self.model = DataModel(self.clock)
        self.wb.register_workflow(KID)

    # Suspend and resume are left to the base machine (test_model.py), whose model knows
    # them; here they are a plain method, not a rule. A suspended run's maps are covered by
    # tests/integration/test_maps.py (held between items, resumed).
    def suspend_or_resume(self, pick: int, resume: bool) -> None:  # type: ignore[override]
        raise AssertionError("not a rule of the data-driven machine")

    # Lost rows likewise (issue 20): the base machine's model knows LOST tombstones and
    # their retries; this model of maps and child runs does not yet (a lost map item or
    # child attempt is covered by tests/integration/test_i20_lost_late.py only).
    def lose_row(self, pick: int) -> None:  # type: ignore[override]
        raise AssertionError("not a rule of the data-driven machine")

    def _attempts(self, *states: ActivityState) -> list[tuple[base.MWorkflow, base.MAct]]:
        """Attempts an outside caller may move (not a map's or a child's own row)."""
        return [(wf, a) for wf, a in super()._attempts(*states)
                if self.model.kind(wf, a.name) not in ("map", "child")]  # type: ignore[arg-type]

    def _actual(self, wx: str) -> tuple[str, dict[str, str]]:
        wf = self.wb.get_workflow(wx)
        return wf.state.value, {a.activity_exec_id: a.state.value
                                for a in (*wf.activities, *wf.items)}

    @precondition(lambda self: sum(w.parent is None for w in self.model.wfs.values()) < 3)
    @rule(shape=data_dags(), size=st.integers(0, 3))
    def start(self, shape: list[Node], size: int) -> None:  # type: ignore[override]
        self.defs += 1
        acts = []
        for i, (deps, hb, attempts, interval, kind) in enumerate(shape):
            acts.append(ActivityDefinition(
                f"N{i}", tuple(sorted({f"N{d}" for d in deps if d < i})),
                launcher=LauncherSpec.workflow("kid") if kind == "child" else EXT,
                heartbeat_timeout_seconds=None if kind == "child" else hb,
                retry=RetryPolicy(max_attempts=attempts, initial_interval_seconds=interval),
                on_failure=CONTINUE if kind == "continue" else None,
                map_over="$input.xs" if kind.startswith("map") else None,
                max_concurrency=int(kind[-1]) if kind.startswith("map") else None))
        defn = WorkflowDefinition(f"d{COUNTS['examples']}-{self.defs}", tuple(acts))
        self.wb.register_workflow(defn)
        xs = list(range(size))
        request = f"{defn.name}-req"
        wx = self.wb.start_workflow(defn.name, {"xs": xs}, request_id=request)
        self.model.start(wx, defn, xs)
        assert self.wb.start_workflow(defn.name, {"xs": xs}, request_id=request) == wx

    @precondition(lambda self: self._attempts())
    @rule(pick=st.integers(0, 999), verb=st.sampled_from(list(Transition)))
    def outside_move(self, pick: int, verb: Transition) -> None:
        super().outside_move(pick, verb)  # only on attempts an outside caller may move

    @precondition(lambda self: self.model.wfs)
    @rule(pick=st.integers(0, 99))
    def redrive(self, pick: int) -> None:
        wf = list(self.model.wfs.values())[pick % len(self.model.wfs)]
        try:
            self.wb.redrive_workflow(wf.wx)
        except RedriveNotAllowed:
            # A child run is redriven only through its parent (issue 20).
            assert wf.parent is not None or wf.state not in (W.FAILED, W.CANCELLED), wf
            return
        assert wf.parent is None and wf.state in (W.FAILED, W.CANCELLED), wf
        COUNTS["redrives"] += 1
        self.model.redrive(wf)

    @precondition(lambda self: any(self.model.kind(wf, a.name) in ("map", "child")
                                   for wf in self.model.wfs.values() for a in wf.acts))
    @rule(pick=st.integers(0, 99), verb=st.sampled_from(list(Transition)))
    def engine_driven_move(self, pick: int, verb: Transition) -> None:
        cands = [(wf, a) for wf in self.model.wfs.values() for a in wf.acts
                 if self.model.kind(wf, a.name) in ("map", "child")]
        wf, a = cands[pick % len(cands)]
        try:
            self.wb.transition_activity(self.model.aeid(wf, a), verb)
        except EngineDriven:
            return
        except Exception as exc:  # other refusals come first for some verbs
            assert verb is T.TIME_OUT or (a.state, verb) not in ACTIVITY_TRANSITIONS, exc
            return
        raise AssertionError(f"{verb.value} of {a.name} ({a.state.value}) was accepted")

    @rule(seconds=st.sampled_from([5.0, 31.0, 60.0, 130.0, 400.0]))
    def advance_and_sweep(self, seconds: float) -> None:
        now = self.clock.advance(seconds)
        before = deepcopy(self.model)
        report = self.wb.sweep(now)
        assert report.errors == []
        due = [(wx, i) for wx, wf in before.wfs.items() for i, a in enumerate(wf.acts)
               if a.deadline is not None and a.deadline <= now]
        actual = {wx: self._actual(wx) for wx in self.wb_runs()}
        tried = []
        for order in itertools.islice(itertools.permutations(due), MAX_ORDERS):
            trial = deepcopy(before)
            for wx, i in order:
                wf = trial.wfs[wx]
                trial.sweep_workflow(wf, [wf.acts[i]], now)
            seen = {wx: trial.snapshot(wx) for wx in trial.wfs}
            tried.append(seen)
            if seen == actual:
                self.model = trial
                return
        raise AssertionError(f"sweep: tables {actual}, model allows {tried[:3]}")

    def wb_runs(self) -> list[str]:
        """Every run the tables hold for the model's runs (children included)."""
        out = list(self.model.wfs)
        for wx in list(out):
            out += [c for c in self.wb.get_workflow(wx).child_workflow_exec_ids if c not in out]
        return out

    @invariant()
    def ended_runs_are_clean(self) -> None:  # type: ignore[override]
        for wx in self.wb_runs():
            wf = self.wb.get_workflow(wx)
            if wf.state.is_terminal:
                assert all(a.state is not A.RUNNING for a in (*wf.activities, *wf.items)), wf

    @invariant()
    def tables_match_the_model(self) -> None:  # type: ignore[override]
        COUNTS["steps"] += 1
        assert sorted(self.wb_runs()) == sorted(self.model.wfs)
        for wx, mwf in self.model.wfs.items():
            assert self._actual(wx) == self.model.snapshot(wx), wx
            assert_contract_holds(self.wb.get_workflow(wx), mwf.defn)


@pytest.mark.twin
def test_data_flows_match_the_model_in_memory(table_prefix: str) -> None:
    base.run_machine(DataMachine, "memory", table_prefix, EXAMPLES, STEPS)


@pytest.mark.slow
def test_data_flows_match_the_model(ddb_endpoint: str, table_prefix: str) -> None:
    base.run_machine(DataMachine, ddb_endpoint, table_prefix, EXAMPLES, STEPS)
    print(f"\ndata model test: {COUNTS}")
