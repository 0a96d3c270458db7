"""Code workflows as a feature: a run whose definition is a function (``@workflow``).

Its steps are attempts like any activity's (the core moves, retries, times out and
launches them); this feature takes over what follows a step's end — instead of a DAG's
dependents, the function is replayed and decides (engine/code_decide.py) — and makes a
run's first decision when it starts, and a cold one on each reconcile visit (which
finishes whatever a crashed decision left).

Which process decides: a *worker* for the workflow (docs/architecture.md, "Code runs
where the code is") — the client that registered or started it while it lives,
``run_worker``'s modules, ``whimbrel dev`` — as the python launcher's ``WorkerScope``
answers (``ports.decides_here``). Any other process (a one-shot CLI command, the console,
a client that only sends a signal) leaves the decision claimable for a worker
(engine/code_handoff.py) and never fails the run for want of the code.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import replace
from typing import Any

from whimbrel.contract.code import CodeDefinition, CodeWorkflow
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.priority import DEFAULT_PRIORITY
from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import ACTIVITY_FAILED, ActivityState, WorkflowState
from whimbrel.engine import code_cancel, code_handoff
from whimbrel.engine.code_decide import CodeFn, Histories, decide
from whimbrel.engine.feature import Core, Feature, RunRead
from whimbrel.engine.map_repair import MapSteps, repair_step_maps
from whimbrel.engine.ports import decides_here, serve_here

log = logging.getLogger("whimbrel.engine.code")

A = ActivityState
W = WorkflowState

#: A run whose code decides: a running one, and one cancelled (its clean-up).
DECIDING = frozenset({W.RUNNING, W.CANCEL_REQUESTED})


class CodeRuns(Feature):
    """Decisions of code runs.

    Attributes:
        always_replay: no history kept between decisions: each reads the run's rows
            anew (tests; ``whimbrel.testing``).
        decisions: decisions this process made (a count, for tests and logs).
        left: decisions it left for a worker.
    """

    def __init__(self, core: Core) -> None:
        self.core = core
        self.histories = Histories()
        self.always_replay = False
        self._functions: dict[str, CodeFn] = {}
        self.decisions = 0
        self.left = 0

    # -- what runs the code --------------------------------------------------------------

    def add(self, wf: CodeWorkflow[Any]) -> None:
        """This process has ``wf``'s function (it registered it)."""
        if self._functions.get(wf.name, wf.fn) is not wf.fn:
            self.histories.give_up_live()  # other code: runs kept going replay with it
        self._functions[wf.name] = wf.fn
        # Its client is a worker for it from now on (its scope says so while it lives).
        serve_here(self.core.launchers.get("python"), {"target": wf.definition().code})

    def decides_here(self, defn: CodeDefinition) -> bool:
        """Whether this process is a worker for ``defn``'s code now (else its decisions
        are left for one). A process whose python launcher keeps no scope decides when
        it has the function (registered, or importable)."""
        here = decides_here(self.core.launchers.get("python"), defn.code)
        return self.function(defn) is not None if here is None else here

    def function(self, defn: CodeDefinition) -> CodeFn | None:
        fn = self._functions.get(defn.name)
        if fn is not None:
            return fn
        module, _, qualname = defn.code.partition(":")
        try:
            found: Any = importlib.import_module(module)
            for part in qualname.split("."):
                found = getattr(found, part)
        except (ImportError, AttributeError) as exc:
            log.info("code workflow %s: %s not importable here (%s); left to a process "
                     "that has it", defn.name, defn.code, exc)
            return None
        fn = found.fn if isinstance(found, CodeWorkflow) else found
        return fn if callable(fn) else None

    def run_decision(self, wf: WorkflowRecord, defn: CodeDefinition,
                     trigger: ActivityRecord | None = None, *, cold: bool = False,
                     why: str | None = None) -> None:
        """Decide here if this process is a worker for ``defn``, else leave the decision
        for one; ``why``: what asked for it (the entry's key; default: ``trigger``'s id)."""
        if wf.state not in DECIDING:
            return
        if not self.decides_here(defn):
            key = why or (trigger.activity_exec_id if trigger is not None else "decide")
            if code_handoff.leave(self.core, wf, defn, key, cold=cold):
                self.left += 1
            return
        self._decide(wf, defn, trigger, cold=cold)

    def _decide(self, wf: WorkflowRecord, defn: CodeDefinition,
                trigger: ActivityRecord | None = None, *, cold: bool = False) -> None:
        if wf.state not in DECIDING:
            return
        fn = self.function(defn)
        if fn is None:
            # A worker for its module without the function (renamed, or gone): the
            # run waits; a worker with the code decides on the run's next visit.
            log.warning("code workflow %s: %s not found in this worker", defn.name,
                        defn.code)
            return
        self.decisions += 1
        decide(self.core, self.histories, fn, wf, defn, trigger,
               cold=cold or self.always_replay, live=not self.always_replay)

    def take_left(self, entry: ActivityRecord, *, actor: str) -> bool:
        """Take a decision another process left for a worker (``entry``, from the
        claimable index) and make it; False if another worker took it first."""
        return code_handoff.take(
            self.core, entry, lambda wf, defn, cold: self._decide(wf, defn, cold=cold),
            actor=actor)

    # -- hooks ---------------------------------------------------------------------------

    def begin(self, record: WorkflowRecord) -> WorkflowRecord:
        if record.priority is None:
            defn = self.core.definitions.definition(record.workflow_name, record.version)[1]
            if isinstance(defn, CodeDefinition) and defn.priority != DEFAULT_PRIORITY:
                return replace(record, priority=defn.priority)
        return record

    def started(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> None:
        if isinstance(defn, CodeDefinition):
            self.run_decision(wf, self.core.definitions.definition_of(wf),  # type: ignore[arg-type]
                              why=f"start/{wf.redrives}")

    def follow_up(self, item: ActivityRecord, run: RunRead) -> bool:
        if item.step is None:
            return False
        wf = self.core.flow.run_going_on(item, run)
        if wf is None:
            return True
        defn = self.core.definitions.definition_of(item)
        assert isinstance(defn, CodeDefinition)
        if item.state in ACTIVITY_FAILED:
            # Its retry per its policy; with none left, failed_for_good below decides.
            self.core.flow.retry_or_fail(wf, defn, item)
        else:
            self.run_decision(wf, defn, item)
        return True

    def failed_for_good(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                        item: ActivityRecord, why: str) -> bool:
        if not isinstance(defn, CodeDefinition):
            return False
        self.run_decision(wf, defn, item)  # the code gets StepFailed
        return True

    def finish_start(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool:
        if not isinstance(defn, CodeDefinition):
            return False
        # Re-derives whatever a crash left. Left for a worker under the visit's key (the
        # check it was due for; a visit with none armed: its time), one entry per visit.
        visit = wf.check_epoch if wf.check_epoch is not None else self.core.clock()
        # A ctx.map's chain and end need no code: repaired here, as a DAG map's are.
        maps = self.core.feature(MapSteps)  # type: ignore[type-abstract]  # (a protocol)
        repair_step_maps(maps, wf, defn,
                         self.core.store.list_activities(wf.workflow_exec_id, items=False))
        self.run_decision(wf, defn, cold=True, why=f"check/{wf.redrives}/{visit}")
        return True

    def cancelling(self, wf: WorkflowRecord, defn: WorkflowDefinition, *,
                   again: bool, actor: str | None = None) -> bool:
        if not isinstance(defn, CodeDefinition) or not code_cancel.cleans_up(wf):
            return False  # settled as any run: nothing of its code to clean up
        code_cancel.settle(
            self.core, wf, defn,
            lambda run, code, why: self.run_decision(run, code, cold=True, why=why),
            again=again, actor=actor)
        return True

    def ended(self, wf: WorkflowRecord) -> None:
        self.histories.forget(wf.workflow_exec_id)
