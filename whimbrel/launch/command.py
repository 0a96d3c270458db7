"""``command`` launcher: run a subprocess supervised like ``whimbrel exec``."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor

from whimbrel.engine import LaunchRequest

#: Supervises one command activity to its end: (request, argv) -> exit code.
Supervisor = Callable[[LaunchRequest, list[str]], int]


class CommandLauncher:
    """Starts ``config["argv"]`` with the activity ids in its environment.

    The supervisor (wired by the client to the worker layer) marks the activity
    RUNNING, heartbeats while the child runs, records the exit code, and stops the
    child with SIGTERM then SIGKILL if the activity is cancelled or timed out.
    """

    #: Its activities run in this process (see ``engine.ports.runs_in_process``).
    in_process = True

    def __init__(self, executor: Executor, supervisor: Supervisor) -> None:
        self.executor = executor
        self.supervisor = supervisor

    def launch(self, request: LaunchRequest) -> None:
        argv = [str(a) for a in request.config["argv"]]  # type: ignore[attr-defined]
        self.executor.submit(self.supervisor, request, argv)
