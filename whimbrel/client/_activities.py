"""The activity side of the public facade: report, heartbeat, claim, retry and run
activities (mixed into :class:`whimbrel.Whimbrel`)."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from whimbrel.client import simple
from whimbrel.contract import checks
from whimbrel.contract.states import Transition
from whimbrel.engine import ActivityExec, Clock, Engine, retry_activity
from whimbrel.store.store import Store
from whimbrel.worker.command import run_command
from whimbrel.worker.run import ActivityRun, heartbeat, run_activity


class Activities:
    """Activities: report, heartbeat, claim, retry, run."""

    engine: Engine
    store: Store
    clock: Clock

    def get_activity(self, activity_exec_id: str) -> ActivityExec:
        return self.engine.reads.get_activity(activity_exec_id)

    def transition_activity(self, activity_exec_id: str, transition: Transition | str, *,
                            output: Any = None, error: Any = None,
                            error_type: str | None = None) -> ActivityExec:
        """Apply a contract move to an activity and run its follow-ups. ``error_type``
        names the kind of a failure (``RetryPolicy.non_retryable`` lists those that are
        never retried).

        Raises:
            IllegalTransition: the contract forbids the move.
            StateConflict: the activity is no longer in the state the move needs.
            InvalidInput: a malformed ``error_type``.
        """
        if error_type is not None:
            checks.text(error_type, "error_type", max_chars=256)
        return self.engine.moves.transition(activity_exec_id, Transition(transition),
                                      output=output, error=error, error_type=error_type)

    def heartbeat(self, activity_exec_id: str, details: Any = None) -> None:
        """Report that a running activity is alive (one write, always: the throttled
        helper is ``ActivityRun.heartbeat``), and with ``details`` (any JSON value) how
        far it got: the attempt keeps the latest, and its next attempt reads them as
        ``ActivityRun.previous_details``.

        Raises:
            ActivityCancelled: the activity was cancelled; stop work.
            ActivityTimedOut: the system gave up on it.
            InvalidInput: ``details`` not JSON or too large (nothing was written).
        """
        heartbeat(self.engine, activity_exec_id, details=details)

    def claim(self, *, workflow_name: str | None = None,
              activity_name: str | None = None) -> ActivityExec | None:
        """Take one READY ``external`` activity (READY -> RUNNING), or None if none waits
        in a RUNNING workflow.

        The candidates come from a sparse index (eventually consistent); the move itself
        is conditional, so two workers never claim the same activity.

        Raises:
            InvalidInput: a malformed name.
        """
        if workflow_name is not None:
            checks.workflow_name(workflow_name)
        if activity_name is not None:
            checks.text(activity_name, "activity_name", max_chars=64)
        claimed = self.engine.claims.claim(workflow_name, activity_name)
        return ActivityExec.from_record(claimed) if claimed is not None else None

    def retry_activity(self, activity_exec_id: str) -> ActivityExec:
        """Run a FAILED or TIMED_OUT attempt again, as attempt n + 1, while its workflow
        is RUNNING (a retry waiting for its back-off is launched now instead).

        Returns:
            The new attempt as it is after its launch.

        Raises:
            InvalidInput: not an activity execution id.
            ActivityNotFound: no such attempt.
            RetryNotAllowed: the attempt is not FAILED/TIMED_OUT, a newer attempt
                started, or the workflow is no longer RUNNING (the message says why).
        """
        return retry_activity(self.engine, activity_exec_id, actor=self.engine.actor)

    def run_activity(self, activity_exec_id: str) -> AbstractContextManager[ActivityRun]:
        """Context manager for activity code; see :func:`whimbrel.worker.run_activity`."""
        return run_activity(self.engine, activity_exec_id)

    def send_activity_event(self, activity_exec_id: str, transition: Transition | str, *,
                            output: Any = None, error: Any = None) -> str:
        """Write one ``activity_event`` item; returns its ``activity_event_id``.

        Raises:
            InvalidInput: malformed id, unknown transition, or output not JSON / too large.
        """
        return simple.send_activity_event(self.store, self.clock, activity_exec_id,
                                          transition, output=output, error=error)

    def run_command(self, activity_exec_id: str, argv: list[str], *,
                    env: Mapping[str, str] | None = None,
                    kill_grace_seconds: float = 5.0) -> int:
        """Run ``argv`` as activity ``activity_exec_id`` (RUNNING, heartbeats, its end by
        the exit code, SIGTERM then SIGKILL when it is cancelled or times out) and return
        the child's exit code. What ``whimbrel exec`` and the ``command`` launcher do.

        Raises:
            ActivityCancelled / ActivityTimedOut: it can no longer run.
            StateConflict: someone else runs it.
        """
        return run_command(self.engine, activity_exec_id, argv, env=env,
                           kill_grace_seconds=kill_grace_seconds)
