"""``python`` launcher: run ``module:function`` in a thread pool of this process."""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from whimbrel.contract.errors import LaunchError
from whimbrel.engine.ports import LaunchRequest

log = logging.getLogger("whimbrel.launch.python")

#: Runs one activity to its end: (request, function) -> None. Supplied by the client,
#: which wires it to the worker helpers (launch sits below worker in the layers).
Runner = Callable[[LaunchRequest, Callable[..., Any]], None]


def resolve_target(target: str) -> Callable[..., Any]:
    """Import ``module:function``.

    Raises:
        LaunchError: the module or function does not exist.
    """
    module_name, _, func_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        func = getattr(module, func_name)
    except (ImportError, AttributeError) as exc:
        raise LaunchError(f"cannot import python activity {target!r}: {exc}",
                          target=target) from exc
    if not callable(func):
        raise LaunchError(f"python activity {target!r} is not callable", target=target)
    return func  # type: ignore[no-any-return]


class PythonLauncher:
    """Hands each activity to ``executor``; the function gets an ``ActivityRun``."""

    #: Its activities run in this process (see ``engine.ports.runs_in_process``).
    in_process = True

    def __init__(self, executor: Executor, runner: Runner) -> None:
        self.executor = executor
        self.runner = runner
        #: Activities whose runner raised (each logged with its traceback): a metric of
        #: trouble that escaped the worker's own handling, e.g. an end not recorded.
        self.failures = 0
        self._lock = threading.Lock()

    def launch(self, request: LaunchRequest) -> None:
        func = resolve_target(str(request.config["target"]))
        self.executor.submit(self._run, request, func)

    def _run(self, request: LaunchRequest, func: Callable[..., Any]) -> None:
        try:
            self.runner(request, func)
        except BaseException:  # the runner recorded the failure; keep the pool alive
            with self._lock:
                self.failures += 1
            log.exception("python activity %s raised", request.activity_exec_id)
