"""Workflow-level moves: fail, cancel, time out, settle (stop what can be stopped and end
the workflow once nothing runs), and the tasks every end needs.

The end tasks (the request row's expiry, deleting fan-in edges nobody will consume,
pushing out the expiry of rows of a long run) run *before* the terminal write: a crash
between leaves a live run that the reconciler ends again, and the terminal write itself
clears the reconcile index, so a finished run needs nothing more.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import StateConflict
from whimbrel.contract.ids import END_NODE
from whimbrel.contract.payloads import clip_error
from whimbrel.contract.records import REMOVE, ActivityRecord, WorkflowRecord
from whimbrel.contract.states import (
    ACTIVITY_TERMINAL,
    WORKFLOW_LIVE,
    WORKFLOW_SETTLING,
    ActivityState,
    WorkflowState,
    WorkflowTransition,
    workflow_sources,
)
from whimbrel.engine import rules
from whimbrel.engine.base import EngineBase
from whimbrel.engine.metrics import report_workflow_end

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState
WT = WorkflowTransition



class WorkflowEnding(EngineBase):
    """The moves that end a workflow."""

    def end_workflow(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                     expected: Collection[WorkflowState], state: WorkflowState, *,
                     error: str | None = None,
                     activities: Sequence[ActivityRecord] | None = None) -> bool:
        """The end tasks, then the terminal write; False if someone else ended it."""
        now = self.clock()
        expires = rules.expiry(now, self.retention(defn))
        self.before_end(wf, defn, state, expires, activities)
        changes: dict[str, object] = {"ended_epoch": now,
                                      "check_epoch": self.check_at_end(wf, now)}
        if error:
            changes["error"] = error
        if expires is not None:
            changes["expires_epoch"] = expires
        try:
            ended = self.store.move_workflow(wf.workflow_exec_id, expected, state, changes,
                                             now=now, actor=self.actor,
                                             workflow_name=wf.workflow_name)
        except StateConflict:
            return False
        log.info("workflow %s %s", wf.workflow_exec_id, state.value)
        report_workflow_end(self.metrics, ended)
        return True

    def before_end(self, wf: WorkflowRecord, defn: WorkflowDefinition, state: WorkflowState,
                   expires: float | None, activities: Sequence[ActivityRecord] | None) -> None:
        """Idempotent end tasks that must land before the terminal write."""
        wx = wf.workflow_exec_id
        traced = wf.request_expires_epoch
        if expires is not None and wf.workflow_request_id and \
                (traced is None or traced < expires):
            self.store.expire_request(wf.workflow_request_id, expires)
        if state is not W.COMPLETED:
            # Edges of a run that did not complete would never be consumed: delete them.
            targets = [a.name for a in defn.activities if len(a.depends_on) > 1]
            if len(defn.sinks) > 1:
                targets.append(END_NODE)
            for down in targets:
                for up in self.store.pending_dependencies(wx, down, limit=None):
                    self.store.delete_dependency(wx, down, up)
        if expires is not None and activities:
            # Rows of activities that ended more than a day before the run (rules.py,
            # RETENTION_SLACK_SECONDS): only a run longer than a day pays for these.
            for act in activities:
                if act.expires_epoch is not None and act.expires_epoch < expires:
                    self.store.try_set_activity(act.activity_exec_id,
                                                {"expires_epoch": expires},
                                                states=ACTIVITY_TERMINAL)

    def check_at_end(self, wf: WorkflowRecord, now: float) -> object:
        """The ``check_epoch`` a run's terminal write leaves: none (a child run keeps one
        until its parent has heard of its end: engine/children.py)."""
        return REMOVE

    def after_end(self, wf: WorkflowRecord) -> None:
        """Follow-ups of an ended run that still carries a check time; then no more
        visits."""
        self.store.set_workflow(wf.workflow_exec_id, {"check_epoch": REMOVE},
                                states=[wf.state])

    def fail_workflow(self, wf: WorkflowRecord, error: str) -> None:
        try:
            # Only a live, not yet failing or cancelled run starts to fail.
            self.store.move_workflow(wf.workflow_exec_id, workflow_sources(WT.FAIL),
                                     W.FAILED_WAITING, {"error": clip_error(error) or ""},
                                     now=self.clock(), actor=self.actor,
                                     workflow_name=wf.workflow_name)
        except StateConflict:
            pass  # already failing, cancelling or finished
        self.settle(wf.workflow_exec_id)

    def cancel(self, wx: str) -> None:
        """Request cancellation and stop what can be stopped. Idempotent.

        Raises:
            WorkflowNotFound: no such execution.
        """
        wf = self.workflow(wx)
        if wf.state in workflow_sources(WT.CANCEL):
            try:
                self.store.move_workflow(wx, workflow_sources(WT.CANCEL), W.CANCEL_REQUESTED,
                                         {}, now=self.clock(), actor=self.actor,
                                         workflow_name=wf.workflow_name)
            except StateConflict:
                pass  # finished or cancelled meanwhile; settle sorts it out
        self.settle(wx)

    def time_out_workflow(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool:
        """End a live run whose deadline passed: TIMED_OUT at once, then ask what runs
        to stop (as a cancel does). False if it had ended already."""
        why = f"workflow timed out after {defn.timeout_seconds} s"
        ended = self.end_workflow(wf, defn, workflow_sources(WT.TIME_OUT), W.TIMED_OUT,
                                  error=why)
        self.settle(wf.workflow_exec_id)
        return ended

    def settle(self, wx: str) -> None:
        """For a failing, cancelled or ended workflow: cancel what has not started, ask
        running activities to stop (cancel, time-out and stragglers of an ended run), and
        end a failing or cancelled workflow once nothing runs."""
        wf = self.workflow(wx)
        state = wf.state
        if state not in WORKFLOW_SETTLING and state in WORKFLOW_LIVE:
            return
        defn = self.definition_of(wf)
        ask = state is W.CANCEL_REQUESTED or state not in WORKFLOW_LIVE
        acts = self.store.list_activities(wx)
        active = [a for a in acts if self.stop_activity(a, defn, ask_running=ask)]
        if state not in WORKFLOW_LIVE:
            if wf.check_epoch is not None:
                self.after_end(wf)
            return
        if not active:
            final = W.CANCELLED if state is W.CANCEL_REQUESTED else W.FAILED
            self.end_workflow(wf, defn, [state], final, activities=acts)

    def stop_activity(self, act: ActivityRecord, defn: WorkflowDefinition, *,
                      ask_running: bool) -> bool:
        """Cancel a not-started attempt; returns True while the attempt may still run."""
        spec = defn.activity(act.activity_name)
        current: ActivityRecord | None = act
        for _ in range(8):  # each lost race means the activity moved on; retry from there
            if current is None or current.state is None or current.state.is_terminal:
                return False
            st = current.state
            if st is A.CANCELLED_RUNNING or (st is A.RUNNING and not ask_running):
                return True
            target = A.CANCELLED_RUNNING if st is A.RUNNING else A.CANCELLED
            changes = rules.changes_for(spec, st, target, now=self.clock(),
                                        workflow_name=act.workflow_name,
                                        retention=self.retention(defn))
            try:
                self.move(act.activity_exec_id, st, (target,), changes)
                return target is A.CANCELLED_RUNNING
            except StateConflict as lost:
                current = lost.current
        return True
