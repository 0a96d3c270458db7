"""Workflow-level moves (part of the core): fail, cancel, time out, settle (stop what can
be stopped and end the workflow once nothing runs), and the tasks every end needs.

The end tasks (the request row's expiry, deleting fan-in edges nobody will consume,
pushing out the expiry of rows of a long run) run *before* the terminal write: a crash
between leaves a live run that the reconciler ends again, and the terminal write itself
clears the reconcile index, so a finished run needs nothing more.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import StateConflict, WorkflowAlreadyEnded
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
from whimbrel.engine.feature import Core, Feature
from whimbrel.engine.metrics import report_workflow_end

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState
WT = WorkflowTransition


class Ending:
    """A run's end: fail, cancel, time out, settle; stopping its attempts. A part of the
    engine: ``engine.ending.op(…)``."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def end_workflow(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                     expected: Collection[WorkflowState], state: WorkflowState, *,
                     error: str | None = None,
                     activities: Sequence[ActivityRecord] | None = None,
                     extra: Mapping[str, str] | None = None,
                     actor: str | None = None) -> bool:
        """The end tasks, then the terminal write; False if someone else ended it.

        A feature may keep a check time on the ended run (``Feature.check_at_end``: a child
        run, until its parent's attempt has heard; a run ended early, until what it left
        unstarted is skipped); the run's ``after_end`` follow-ups then run here, and again on
        every reconcile visit until they are done. ``extra``: attributes the terminal write
        also sets (an early end's ``output`` and ``ended_by``), seen by ``check_at_end``.
        ``actor``: who the end is recorded under (default: this engine; a caller's tag
        lets a redelivery of its request be recognised).
        """
        if extra:
            fields: dict[str, Any] = dict(extra)
            wf = replace(wf, **fields)
        now = self.core.clock()
        expires = rules.expiry(now, self.core.definitions.retention(defn))
        self.before_end(wf, defn, state, expires, activities)
        check: object = REMOVE
        kept = self.core.hooks.first_answer(Feature.check_at_end, wf, now)
        if kept is not None:
            check = kept
        changes: dict[str, object] = {"ended_epoch": now, "check_epoch": check}
        if error:
            changes["error"] = error
        changes.update(extra or {})
        if expires is not None:
            changes["expires_epoch"] = expires
        try:
            ended = self.core.store.move_workflow(wf.workflow_exec_id, expected, state, changes,
                                               now=now, actor=actor or self.core.actor,
                                               workflow_name=wf.workflow_name)
        except StateConflict:
            return False
        if expires is not None and ended.input_apart:
            # Its input, kept apart, goes with it (after the end: a run that did not end
            # keeps it; a crash just here leaves the input without an expiry).
            self.core.store.expire_workflow_data(wf.workflow_exec_id, expires)
        log.info("workflow %s %s", wf.workflow_exec_id, state.value)
        report_workflow_end(self.core.metrics, ended)
        self.core.hooks.observe(Feature.ended, ended)
        if check is not REMOVE:
            self.after_end(self.core.reads.workflow(wf.workflow_exec_id))
        return True

    def before_end(self, wf: WorkflowRecord, defn: WorkflowDefinition,
                   state: WorkflowState, expires: float | None,
                   activities: Sequence[ActivityRecord] | None) -> None:
        """Idempotent end tasks that must land before the terminal write."""
        wx = wf.workflow_exec_id
        traced = wf.request_expires_epoch
        # A child run has no request row (its parent's attempt is the record of it).
        if expires is not None and wf.workflow_request_id and not wf.parent_activity_exec_id \
                and (traced is None or traced < expires):
            self.core.store.cold.expire_request(wf.workflow_request_id, expires)
        if state is not W.COMPLETED:
            # Edges of a run that did not complete would never be consumed: delete them.
            targets = [a.name for a in defn.activities if len(a.depends_on) > 1]
            if len(defn.sinks) > 1:
                targets.append(END_NODE)
            for down in targets:
                for up in self.core.store.pending_dependencies(wx, down, limit=None):
                    self.core.store.delete_dependency(wx, down, up)
        if expires is not None and activities:
            # Rows of activities that ended more than a day before the run (rules.py,
            # RETENTION_SLACK_SECONDS): only a run longer than a day pays for these.
            for act in activities:
                if act.expires_epoch is not None and act.expires_epoch < expires:
                    self.core.store.try_set_activity(act.activity_exec_id,
                                                  {"expires_epoch": expires},
                                                  states=ACTIVITY_TERMINAL)

    def after_end(self, wf: WorkflowRecord) -> None:
        """Follow-ups of an ended run that still carries a check time (the features'
        ``after_end``); then no more visits."""
        self.core.hooks.observe(Feature.after_end, wf)
        self.core.store.set_workflow(wf.workflow_exec_id, {"check_epoch": REMOVE},
                                  states=[wf.state])

    def fail_workflow(self, wf: WorkflowRecord, error: str) -> None:
        try:
            # Only a live, not yet failing or cancelled run starts to fail.
            self.core.store.move_workflow(wf.workflow_exec_id, workflow_sources(WT.FAIL),
                                     W.FAILED_WAITING, {"error": clip_error(error) or ""},
                                     now=self.core.clock(), actor=self.core.actor,
                                     workflow_name=wf.workflow_name)
        except StateConflict:
            pass  # already failing, cancelling or finished
        self.core.ending.settle(wf.workflow_exec_id)

    def cancel(self, wx: str, *, actor: str | None = None,
               refuse_ended: bool = True, again: bool = False) -> None:
        """Request cancellation and stop what can be stopped. Idempotent. ``actor`` is
        recorded in the run's history (a CANCEL row's tag, to recognise its redelivery).
        ``refuse_ended``: a caller's cancel, told when the run ended other than CANCELLED.
        ``again``: a caller's own cancel (not a redelivery, not the engine's cascade): of
        a run already CANCEL_REQUESTED whose code cleans up, it ends the clean-up
        (``Feature.cancelling``).

        Raises:
            WorkflowNotFound: no such execution.
            WorkflowAlreadyEnded: ``refuse_ended`` and it ended otherwise.
        """
        wf = self.core.reads.workflow(wx)
        if refuse_ended and wf.state.is_terminal and wf.state is not W.CANCELLED:
            raise WorkflowAlreadyEnded(workflow_exec_id=wx, workflow_state=wf.state.value)
        if wf.state in workflow_sources(WT.CANCEL):
            try:
                self.core.store.move_workflow(wx, workflow_sources(WT.CANCEL), W.CANCEL_REQUESTED,
                                         {}, now=self.core.clock(), actor=actor or self.core.actor,
                                         workflow_name=wf.workflow_name)
            except StateConflict:
                pass  # finished or cancelled meanwhile; settle sorts it out
        elif again and wf.state is W.CANCEL_REQUESTED and self.core.hooks.take_over(
                Feature.cancelling, wf, self.core.definitions.definition_of(wf),
                again=True, actor=actor):
            return
        self.core.ending.settle(wx)

    def time_out_workflow(self, wf: WorkflowRecord, defn: WorkflowDefinition) -> bool:
        """End a live run whose deadline passed: TIMED_OUT at once, then ask what runs
        to stop (as a cancel does). False if it had ended already."""
        why = f"workflow timed out after {defn.timeout_seconds} s"
        ended = self.end_workflow(wf, defn, workflow_sources(WT.TIME_OUT), W.TIMED_OUT,
                             error=why)
        self.core.ending.settle(wf.workflow_exec_id)
        return ended

    def settle(self, wx: str) -> None:
        """For a failing, cancelled or ended workflow: cancel what has not started, ask
        running activities to stop (cancel, time-out and stragglers of an ended run), and
        end a failing or cancelled workflow once nothing runs."""
        wf = self.core.reads.workflow(wx)
        state = wf.state
        if state not in WORKFLOW_SETTLING and state in WORKFLOW_LIVE:
            return
        defn = self.core.definitions.definition_of(wf)
        ask = state is W.CANCEL_REQUESTED or state not in WORKFLOW_LIVE
        if state not in WORKFLOW_LIVE and wf.check_epoch is not None:
            # Its follow-ups first: a run ended early skips what it left unstarted, which
            # the stop below would otherwise cancel.
            self.after_end(wf)
        if state is W.CANCEL_REQUESTED and self.core.hooks.take_over(
                Feature.cancelling, wf, defn, again=False):
            return
        acts = self.core.store.list_activities(wx)
        active = [a for a in acts if self.core.ending.stop_activity(a, defn, ask_running=ask)]
        if state not in WORKFLOW_LIVE:
            return
        if not active:
            final = W.CANCELLED if state is W.CANCEL_REQUESTED else W.FAILED
            self.end_workflow(wf, defn, [state], final, activities=acts)

    def stop_activity(self, act: ActivityRecord, defn: WorkflowDefinition, *,
                      ask_running: bool) -> bool:
        """Stop an attempt (a feature may take it over: a running map stops at once, a child
        run is cancelled with its attempt); True while the attempt may still run."""
        still = self.core.hooks.first_answer(Feature.stop, act, defn, ask_running=ask_running)
        if still is not None:
            return still
        return self.stop_plainly(act, defn, ask_running=ask_running)

    def stop_plainly(self, act: ActivityRecord, defn: WorkflowDefinition, *,
                     ask_running: bool) -> bool:
        """Cancel a not-started attempt, ask a running one to stop; True while the attempt
        may still run."""
        spec = defn.activity(act.activity_name)
        current: ActivityRecord | None = act
        for _ in range(8):  # each lost race means the activity moved on; retry from there
            if current is None or current.state is None or current.state.is_terminal:
                return False
            st = current.state
            if st is A.CANCELLED_RUNNING or (st is A.RUNNING and not ask_running):
                return True
            target = A.CANCELLED_RUNNING if st is A.RUNNING else A.CANCELLED
            changes = rules.changes_for(spec, st, target, now=self.core.clock(),
                                        workflow_name=act.workflow_name,
                                        retention=self.core.definitions.retention(defn))
            try:
                self.core.known.move(act.activity_exec_id, st, (target,), changes)
                return target is A.CANCELLED_RUNNING
            except StateConflict as lost:
                current = lost.current
        return True
