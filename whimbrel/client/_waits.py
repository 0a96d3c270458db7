"""The waiting side of the public facade: signals, approvals, suspend and resume (mixed
into :class:`whimbrel.Whimbrel`). docs/contract.md, "Waits and suspension"."""

from __future__ import annotations

from typing import Any

from whimbrel.engine import ActivityExec, Engine, Suspend, resolved
from whimbrel.engine import Waits as WaitFeature


class Waits:
    """Waits: signal, approve, reject, suspend, resume."""

    engine: Engine

    def signal(self, workflow_exec_id: str, name: str, payload: Any = None, *,
               signal_id: str | None = None) -> None:
        """Send signal ``name`` to a run. The activity waiting for it (``LauncherSpec.
        signal(name)``) completes with ``payload`` as its output; if none waits yet, the
        signal is kept until one does. The same ``signal_id`` sent again counts once.

        Raises:
            InvalidInput: a malformed argument, a payload that is not JSON or larger than
                an output may be, a name no activity of the run waits for, or a
                ``signal_id`` sent before with another name or payload.
            WorkflowNotFound: no such run.
            SignalRefused: the run has ended (or is ending), or every activity waiting
                for ``name`` has received a signal or ended.
        """
        self.engine.feature(WaitFeature).send(workflow_exec_id, name, payload, signal_id=signal_id)

    def approve(self, activity_exec_id: str, *, by: str, comment: str = "") -> ActivityExec:
        """Approve an activity waiting for approval: it completes with output
        ``{"approved": True, "by": by, "comment": comment, "at": <epoch>}``.

        Raises:
            InvalidInput: a malformed id, ``by`` or ``comment``; not an approval.
            ActivityNotFound: no such attempt.
            NotAnApprover: the approval names its approvers and ``by`` is not one.
            StateConflict: it does not wait for a decision (any more): another decision,
                its timeout or a cancel came first, or it was not reached yet.
        """
        decided = self.engine.feature(WaitFeature).decide(
            activity_exec_id, approve=True, by=by, comment=comment)
        return ActivityExec.from_record(resolved(self.engine, decided))

    def reject(self, activity_exec_id: str, *, by: str, comment: str = "") -> ActivityExec:
        """Reject an activity waiting for approval: it fails with an error naming who
        rejected and why (``error_type`` ``Rejected``; its retry policy does not apply, so
        the workflow fails).

        Raises:
            InvalidInput, ActivityNotFound, NotAnApprover, StateConflict: as ``approve``.
        """
        decided = self.engine.feature(WaitFeature).decide(
            activity_exec_id, approve=False, by=by, comment=comment)
        return ActivityExec.from_record(resolved(self.engine, decided))

    def suspend_workflow(self, workflow_exec_id: str) -> None:
        """Suspend a RUNNING run (``WorkflowState.SUSPENDED``): nothing new is queued,
        launched or claimed; running activities run to their end and their ends are
        recorded; signals and decisions are still received. Idempotent.

        Raises:
            WorkflowNotFound: no such run.
            NotAllowedNow: the run is neither RUNNING nor SUSPENDED.
        """
        self.engine.feature(Suspend).suspend(workflow_exec_id)

    def resume_workflow(self, workflow_exec_id: str) -> None:
        """Resume a SUSPENDED run: what became due while it was suspended (dependents of
        what completed, retries, timers, timeouts) starts now. Idempotent.

        Raises:
            WorkflowNotFound: no such run.
            NotAllowedNow: the run is neither SUSPENDED nor RUNNING.
        """
        self.engine.feature(Suspend).resume(workflow_exec_id)
