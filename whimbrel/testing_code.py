"""A test runner for code workflows on DynamoDB Local (re-exported by
:mod:`whimbrel.testing`): time skipping and ``always_replay``.

    runner = CodeRunner(wb, clock)              # wb built with clock=StepClock()
    run = runner.run(order, {"id": 1})          # registers, starts, skips sleeps
    assert run.output == ...

With ``always_replay=True`` (the default) the client keeps no history and no running
function between decisions: every decision reads the run's rows again and replays the
function from its start, as a process that has just started would, so a test sees what
a cold replay does.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from whimbrel.contract.code import CodeWorkflow
from whimbrel.contract.states import ActivityState
from whimbrel.engine import CodeRuns, WorkflowExec

if TYPE_CHECKING:
    from whimbrel.client.whimbrel import Whimbrel


class HeldClock(Protocol):
    """A clock the test holds and moves, as ``whimbrel.testing.StepClock`` is; named by
    what it does because ``whimbrel.testing`` imports this module, not the reverse."""

    now: float

    def __call__(self) -> float: ...


class CodeRunner:
    """Runs code workflows for a test on a client whose clock the test holds."""

    def __init__(self, wb: Whimbrel, clock: HeldClock, *, always_replay: bool = True) -> None:
        self.wb = wb
        self.clock = clock
        wb.engine.feature(CodeRuns).always_replay = always_replay

    def start(self, workflow: CodeWorkflow[Any], input: Any = None) -> str:
        """Register ``workflow`` (idempotent) and start a run; returns its id."""
        self.wb.register_workflow(workflow)
        return self.wb.start_workflow(workflow.name, input)

    def skip_time(self, workflow_exec_id: str) -> bool:
        """Move the clock to the run's earliest armed timer (a ``ctx.sleep``, a wait's
        time-out) and sweep; False when none is armed."""
        due = [a.timer_epoch for a in self.wb.store.list_activities(workflow_exec_id)
               if a.state is ActivityState.READY and a.timer_epoch is not None]
        if not due:
            return False
        self.clock.now = max(self.clock.now, min(due))
        self.wb.sweep(self.clock.now)
        return True

    def run(self, workflow: CodeWorkflow[Any], input: Any = None, *,
            timeout: float = 30.0) -> WorkflowExec:
        """Start a run and drive it to its end, skipping the time it sleeps; returns it.

        Raises:
            TimeoutError: it did not end within ``timeout`` seconds of real time (it
                waits for a signal, an approval or an external step nobody completes).
        """
        wx = self.start(workflow, input)
        deadline = time.monotonic() + timeout
        while not (run := self.wb.get_workflow(wx)).state.is_terminal:
            if time.monotonic() > deadline:
                raise TimeoutError(f"code run {wx} still {run.state.value}: {run}")
            if not self.skip_time(wx):
                time.sleep(0.02)  # steps run on the client's threads
        return run
