"""Where code runs (mixed into :class:`whimbrel.Whimbrel`): the client as a worker for the
workflows it registered or started, ``run_worker`` for whole modules, and a close that
finishes or hands back what the client holds (docs/contract.md, "Who runs code")."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterable
from types import FrameType
from typing import Any

from whimbrel.contract.code import CodeDefinition
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import InvalidInput, LaunchError, WhimbrelError
from whimbrel.engine import Engine
from whimbrel.launch.modules import import_modules
from whimbrel.launch.python import PythonLauncher, resolve_target
from whimbrel.worker.poll import ClaimLoop

log = logging.getLogger("whimbrel.client")

#: How long ``close()`` waits for the python attempts this client runs to end.
CLOSE_WAIT_SECONDS = 5.0


def python_targets(defn: WorkflowDefinition) -> set[str]:
    """The ``module:function`` of every python activity of ``defn``, and a code
    workflow's ``module:qualname`` (its decisions run where its code is)."""
    targets = {t for a in defn.activities if (t := a.launcher.worker_target)}
    return targets | {defn.code} if isinstance(defn, CodeDefinition) and defn.code \
        else targets


class Workers:
    """The worker side of the client."""

    engine: Engine
    _python: PythonLauncher
    _max_workers: int
    _background: ClaimLoop | None
    _foreground: ClaimLoop | None
    _stop_worker: threading.Event
    _serve_lock: threading.Lock
    #: Targets already judged (imported, or found not importable and said so).
    _decided: set[str]

    # -- the client as a worker for what it registered or started ----------------------

    def _serve(self, defn: WorkflowDefinition) -> None:
        """This client is a worker for ``defn``'s python activities it can import, from
        now on, while it lives: it runs them when it advances their run, and claims
        those other processes left for a worker (a background loop, started with the
        first)."""
        # Each target is judged once; one served already (a code workflow registered
        # here, ports.serve_here) needs no import.
        targets = {t for t in python_targets(defn) - self._decided
                   if not self._python.scope.covers(t)}
        if not targets or self._python.scope.closed \
                or self.engine.launchers.get("python") is not self._python:
            return  # nothing to run, closing, or python is another launcher's (a Lambda's)
        # Code runs where the code is: a target this process cannot import is left to
        # a worker that can (a deploy script, a console may register without the code).
        here = set()
        self._decided.update(targets)
        for target in sorted(targets):
            try:
                resolve_target(target)
                here.add(target)
            except LaunchError as exc:
                log.warning("%s: this client is no worker for it (a worker for its module "
                            "must run it: docs/operations.md, \"Python workers\")", exc)
        if here:
            self._python.scope.add_targets(here)
            self._serve_in_background()

    def serve_importable(self) -> None:
        """Be a worker for every python activity this process can import, and claim
        those left for a worker in the background (what ``whimbrel dev`` does)."""
        self._python.scope.importable = True
        self._serve_in_background()

    def _serve_in_background(self) -> None:
        if self.engine.launchers.get("python") is not self._python:
            return  # python is another launcher's (a Lambda's): no thread claims here
        with self._serve_lock:
            if self._background is None and not self._python.scope.closed:
                self._background = ClaimLoop(self.engine, self._python,
                                             concurrency=self._max_workers,
                                             actor=self.engine.actor).start()

    # -- run_worker ---------------------------------------------------------------------

    def run_worker(self, modules: Iterable[str], *, concurrency: int | None = None) -> None:
        """Run as a worker for the python activities and code workflows of ``modules``
        until SIGTERM, SIGINT or :meth:`stop`: claim the python work (and the code runs'
        decisions) other processes left for a worker whose ``module:function`` is in one
        of ``modules`` (each imported first), and
        run up to ``concurrency`` attempts at once (default: this client's
        ``max_workers``). Idle, it polls with a growing pause (at most 1 s). On stop it
        claims nothing more, waits for what runs to finish (up to
        ``CLOSE_WAIT_SECONDS``) and returns; ``close()`` then hands back whatever it
        holds that never started.

        Raises:
            InvalidInput: no module, a module that cannot be imported, or a
                ``concurrency`` below 1.
        """
        names = [modules] if isinstance(modules, str) else list(modules)
        if not names:
            raise InvalidInput("run_worker needs at least one module")
        if concurrency is not None and (isinstance(concurrency, bool) or concurrency < 1):
            raise InvalidInput(f"concurrency must be a whole number of at least 1, "
                               f"not {concurrency!r}")
        import_modules(names, what="run_worker")
        self._python.scope.add_modules(names)
        loop = ClaimLoop(self.engine, self._python,
                         concurrency=concurrency or self._max_workers,
                         actor=self.engine.actor)
        self._stop_worker.clear()
        self._foreground = loop
        restore = self._on_signals()
        try:
            if not self._stop_worker.is_set():  # stop() may come before the loop runs
                loop.run()
        finally:
            loop.stop()
            restore()
            self._foreground = None
            self._python.wait_idle(CLOSE_WAIT_SECONDS)

    def stop(self) -> None:
        """Stop ``run_worker`` (from any thread, or a signal handler): it claims nothing
        more and returns once what it runs has finished."""
        self._stop_worker.set()
        loop = self._foreground
        if loop is not None:
            loop.stopping.set()

    def _on_signals(self) -> Any:
        """SIGTERM and SIGINT stop the worker (only the main thread may set handlers)."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def on_signal(signum: int, frame: FrameType | None) -> None:
            self.stop()

        before = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for s, handler in before.items():
                signal.signal(s, handler)
        return restore

    # -- closing --------------------------------------------------------------------------

    def _close_workers(self, wait_seconds: float) -> None:
        """No longer a worker: stop claiming, hand back what was launched here but never
        started, give what runs ``wait_seconds`` to finish (it goes on afterwards: its
        end is still recorded, and the interpreter waits for it at exit)."""
        self._python.scope.close()
        self.stop()
        with self._serve_lock:
            background = self._background
        if background is not None:
            background.stop(join_seconds=wait_seconds)
        for aeid in self._python.drain(wait_seconds):
            try:
                self.engine.handover.hand_back(aeid,
                                   "its client closed before it started")
            except WhimbrelError as exc:  # its heartbeat time-out or the sweep take it on
                log.warning("%s not handed back: %s", aeid, exc)
