"""What a code workflow's function may meet: a step that failed for good, a wait that
timed out, a replay that no longer matches the run's history, and its run's cancel."""

from __future__ import annotations

from whimbrel.contract.errors import WhimbrelError


class StepFailed(WhimbrelError):
    """A step ended FAILED, TIMED_OUT or CANCELLED after its retries.

    Attributes:
        state: the state its last attempt ended in (``"FAILED"``, ``"TIMED_OUT"``,
            ``"CANCELLED"``).
        error: the error its last attempt reported (None when it gave none).
        error_type: the type name of that error (a python step: the exception's class).
        activity_exec_id: its last attempt.
    """

    def __init__(self, step: str, *, state: str, error: str | None,
                 error_type: str | None, activity_exec_id: str) -> None:
        why = f": {error}" if error else ""
        super().__init__(f"step {step} {state}{why}", step=step, state=state, error=error,
                         error_type=error_type, activity_exec_id=activity_exec_id)
        self.step = step
        self.state = state
        self.error = error
        self.error_type = error_type
        self.activity_exec_id = activity_exec_id


class WaitTimedOut(WhimbrelError):
    """A ``wait_signal`` or ``wait_approval`` passed its ``timeout_seconds``."""

    def __init__(self, wait: str, timeout_seconds: float) -> None:
        super().__init__(f"{wait} timed out after {timeout_seconds} s", wait=wait,
                         timeout_seconds=timeout_seconds)
        self.wait = wait
        self.timeout_seconds = timeout_seconds


class NonDeterminism(WhimbrelError):
    """The replay asked for another step than the run's history holds at that point: the
    code changed under a running run, a fork's new input or code took another path before
    the fork point than its source did (engine/fork_code.py), or the code reads time,
    randomness or ids other than from its context. Nothing was scheduled; the run fails
    with this error, and a redrive after the fix continues from the completed steps.

    Attributes:
        position: where in the run's sequence of steps (1 first).
        expected: the step the history holds there.
        actual: the step the code asked for.
    """

    def __init__(self, *, position: int, expected: str, actual: str) -> None:
        super().__init__(
            f"non-determinism at step {position}: the history holds {expected}, the code "
            f"asked for {actual} (the workflow's code changed under a running run, a "
            "fork's new input or code took another path than its source's, or the code "
            "reads the clock, randomness or ids other than through its context)",
            position=position, expected=expected, actual=actual)
        self.position = position
        self.expected = expected
        self.actual = actual


class Cancelled(BaseException):
    """The run was cancelled while the code waited (docs/code-workflows.md, "Clean-up on
    cancel"): raised where the code waits, so its ``finally`` and ``except Cancelled``
    blocks run and may call steps; the run then ends CANCELLED however the function ends.

    A ``BaseException``, like ``asyncio.CancelledError`` and ``KeyboardInterrupt``, so
    that a broad ``except Exception`` around a step (a retry loop, a saga's handler) does
    not swallow the cancel by accident and carry on as if nothing happened; code that
    means to catch it names it. Not a ``WhimbrelError`` for that reason: nothing raises it
    to a caller of the API.

    Attributes:
        step: the step whose wait the cancel cut (None: a step the run never scheduled).
    """

    def __init__(self, step: str | None = None) -> None:
        where = f" while waiting for {step}" if step else ""
        super().__init__(f"the run was cancelled{where}")
        self.step = step
