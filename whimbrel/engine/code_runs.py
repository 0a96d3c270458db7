"""Code workflows as a feature: a run whose definition is a function (``@workflow``).

Its steps are attempts like any activity's (the core moves, retries, times out and
launches them); this feature takes over what follows a step's end — instead of a DAG's
dependents, the function is replayed and decides (engine/code_decide.py) — and makes a
run's first decision when it starts, and a cold one on each reconcile visit (which
finishes whatever a crashed decision left).

Which process decides: one that has the function — registered through
``Whimbrel.register_workflow`` in this process, or importable by its ``module:qualname``
(the local runtime's handlers and sweep). A process without it leaves the run as it is;
its reconcile visits try again.
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
from whimbrel.engine.code_decide import CodeFn, Histories, decide
from whimbrel.engine.feature import Core, Feature, RunRead

log = logging.getLogger("whimbrel.engine.code")

A = ActivityState
W = WorkflowState


class CodeRuns(Feature):
    """Decisions of code runs.

    Attributes:
        always_replay: no history kept between decisions: each reads the run's rows
            anew (tests; ``whimbrel.testing``).
    """

    def __init__(self, core: Core) -> None:
        self.core = core
        self.histories = Histories()
        self.always_replay = False
        self._functions: dict[str, CodeFn] = {}

    # -- what runs the code --------------------------------------------------------------

    def add(self, wf: CodeWorkflow[Any]) -> None:
        """This process has ``wf``'s function (it registered it)."""
        if self._functions.get(wf.name, wf.fn) is not wf.fn:
            self.histories.give_up_live()  # other code: runs kept going replay with it
        self._functions[wf.name] = wf.fn

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
                     trigger: ActivityRecord | None = None, *, cold: bool = False) -> None:
        fn = self.function(defn)
        if fn is None or wf.state is not W.RUNNING:
            return
        decide(self.core, self.histories, fn, wf, defn, trigger,
               cold=cold or self.always_replay, live=not self.always_replay)

    # -- hooks ---------------------------------------------------------------------------

    def begin(self, record: WorkflowRecord) -> WorkflowRecord:
        if record.priority is None:
            defn = self.core.definitions.definition(record.workflow_name, record.version)[1]
            if isinstance(defn, CodeDefinition) and defn.priority != DEFAULT_PRIORITY:
                return replace(record, priority=defn.priority)
        return record

    def started(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> None:
        if isinstance(defn, CodeDefinition):
            self.run_decision(wf, self.core.definitions.definition_of(wf))  # type: ignore[arg-type]

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
        self.run_decision(wf, defn, cold=True)  # re-derives whatever a crash left
        return True

    def ended(self, wf: WorkflowRecord) -> None:
        self.histories.forget(wf.workflow_exec_id)
