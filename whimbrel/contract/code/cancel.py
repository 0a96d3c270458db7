"""Where a cancel reaches a code run's function: the replay of a cancelled run (its
clean-up decision, docs/code-workflows.md "Clean-up on cancel") raises ``Cancelled`` at
the wait the cancel cut, and what the code asks for after that is its clean-up.

Which wait the cancel cut is read from the history alone, so every replay of the
clean-up finds the same one (STYLE.md 14). A wait on a step that completed, or ended
otherwise for good, returns or raises as recorded; a wait on a step the cancel stopped
(CANCELLED), that never finished, or that the run never scheduled raises ``Cancelled``
— except a CANCELLED step the code had waited on before and gone past (a step is
recorded at a later position: the code went on after it, so its ``StepFailed`` was what
the code saw). A step asked for before the cancel is delivered is never scheduled: it is
the path the cancel cut off. After it, every new step is a *clean-up step*, scheduled
and marked on its row (``encode_step(cleanup=True)``) so that the cancel does not stop it.
"""

from __future__ import annotations

from whimbrel.contract.activities import ActivityDefinition
from whimbrel.contract.code.errors import Cancelled
from whimbrel.contract.code.history import History, StepState
from whimbrel.contract.errors import InvalidDefinition
from whimbrel.contract.states import ActivityState


class CancelScope:
    """What one replay of a cancelled run knows of the cancel.

    Attributes:
        delivered: ``Cancelled`` was raised in this replay (what follows is clean-up).
        cleanup: the clean-up steps started in this replay, by name.
    """

    def __init__(self, history: History) -> None:
        self._history = history
        self.delivered = False
        self.cleanup: set[str] = set()

    def starting(self, step: str, spec: ActivityDefinition) -> bool:
        """Whether ``step``, just started, is a clean-up step (to be scheduled if new).

        Raises:
            Cancelled: a wait (sleep, signal, approval) or a child asked for in clean-up:
                nothing would end it while the run is being cancelled.
            InvalidDefinition: an ``external`` step asked for in clean-up (no worker may
                claim an attempt of a run that is being cancelled), or one in a pool (a
                pool admits no waiting attempt of such a run).
        """
        if not self.delivered:
            return False
        if spec.launcher.is_wait or spec.launcher.kind == "workflow":
            raise Cancelled(step)
        if spec.launcher.is_pull:
            raise InvalidDefinition(spec.name, [
                f"clean-up step {step} is external: a clean-up step runs while its run is "
                "CANCEL_REQUESTED, and no worker claims an attempt of such a run; use a "
                "python function or a pushed launcher (lambda, sqs, ecs, command)"])
        if spec.pool is not None:
            raise InvalidDefinition(spec.name, [
                f"clean-up step {step} is in pool {spec.pool!r}: a clean-up step runs while "
                "its run is CANCEL_REQUESTED, and a pool admits no waiting attempt of such "
                "a run; give it no pool"])
        self.cleanup.add(step)
        return True

    def wait(self, step: str, known: StepState | None, position: int) -> None:
        """The code waits for ``step`` (``known``: what the history holds of it) at
        ``position``, the last position the code has reached.

        Raises:
            Cancelled: the cancel cut this wait.
        """
        if step in self.cleanup:
            return  # a clean-up step: waited for as any step
        if known is not None and known.final:
            if known.state is not ActivityState.CANCELLED:
                return  # it ended before the cancel: as recorded
            if not self.delivered and position < self._history.main_seq:
                return  # cancelled before, and the code went on past it then
        self.delivered = True
        raise Cancelled(step)
