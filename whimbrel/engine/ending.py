"""Workflow-level moves: fail, cancel, settle (stop what can be stopped and end the
workflow once nothing runs)."""

from __future__ import annotations

import logging

from pynamodb.expressions.update import Action

from whimbrel.contract.payloads import clip_error
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.engine.base import EngineBase
from whimbrel.store.errors import ConditionFailed
from whimbrel.store.models import ActivityExecModel

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState


class WorkflowEnding(EngineBase):
    """The moves that end a workflow."""

    def _finish_workflow(self, wx: str, name: str, expected: list[str], state: WorkflowState,
                         error: str | None = None) -> bool:
        m = self.store.models.workflow_exec
        now = self.clock()
        extra: list[Action] = [m.ended_epoch.set(now), m.check_shard.remove(),
                               m.check_epoch.remove()]
        if error:
            extra.append(m.error.set(error))
        try:
            self.store.move_workflow(wx, expected, state.value, now, workflow_name=name,
                                     actor=self.actor, extra=extra)
        except ConditionFailed:
            return False
        log.info("workflow %s %s", wx, state.value)
        return True

    def fail_workflow(self, wx: str, name: str, error: str) -> None:
        m = self.store.models.workflow_exec
        try:
            self.store.move_workflow(wx, [W.RUNNING.value, W.REQUESTED.value],
                                     W.FAILED_WAITING.value, self.clock(), workflow_name=name,
                                     actor=self.actor,
                                     extra=[m.error.set(clip_error(error) or "")])
        except ConditionFailed:
            pass  # already failing, cancelling or finished
        self.settle(wx)

    def cancel(self, wx: str) -> None:
        """Request cancellation and stop what can be stopped. Idempotent.

        Raises:
            WorkflowNotFound: no such execution.
        """
        wf = self._workflow(wx)
        if wf.state not in (W.CANCEL_REQUESTED.value,) and not W(wf.state).is_terminal:
            try:
                self.store.move_workflow(
                    wx, [W.REQUESTED.value, W.RUNNING.value, W.FAILED_WAITING.value],
                    W.CANCEL_REQUESTED.value, self.clock(), workflow_name=wf.workflow_name,
                    actor=self.actor)
            except ConditionFailed:
                pass  # finished or cancelled meanwhile; settle sorts it out
        self.settle(wx)

    def settle(self, wx: str) -> None:
        """For a failing or cancelled workflow: cancel what has not started, ask running
        activities to stop (cancel only), and end the workflow once nothing runs."""
        wf = self._workflow(wx)
        state = W(wf.state)
        cancelling = state is W.CANCEL_REQUESTED
        if state not in (W.FAILED_WAITING, W.CANCEL_REQUESTED) and not state.is_terminal:
            return
        active = False
        for act in self.store.list_activities(wx):
            if self._stop_activity(act, ask_running=cancelling and not state.is_terminal):
                active = True
        if state.is_terminal:
            self.store.clear_workflow_check(wx)
            return
        if not active:
            final = W.CANCELLED if cancelling else W.FAILED
            self._finish_workflow(wx, wf.workflow_name, [state.value], final)

    def _stop_activity(self, act: ActivityExecModel, *, ask_running: bool) -> bool:
        """Cancel a not-started attempt; returns True while the attempt may still run."""
        for _ in range(8):  # each lost race means the activity moved on; re-read and retry
            st = ActivityState(act.state)
            if st.is_terminal:
                return False
            if st is A.CANCELLED_RUNNING:
                return True
            if st is A.RUNNING and not ask_running:
                return True
            target = A.CANCELLED_RUNNING if st is A.RUNNING else A.CANCELLED
            m = self.store.models.activity_exec
            extra: list[Action] = []
            if target is A.CANCELLED:
                extra = [m.ended_epoch.set(self.clock()), m.timer_shard.remove(),
                         m.timer_epoch.remove(), m.claim_shard.remove(), m.claim_key.remove()]
            try:
                self._move(act.activity_exec_id, st, target, extra=extra)
                return target is A.CANCELLED_RUNNING
            except ConditionFailed:
                fresh = self.store.get_activity(act.activity_exec_id)
                if fresh is None:
                    return False
                act = fresh
        return True

