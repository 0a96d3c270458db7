"""``python`` launcher: run ``module:function`` in a thread pool of this process — only
where this process is a *worker* for it (docs/contract.md, "Who runs code").

:class:`WorkerScope` is the one place that answers "may this process run that code?":
the engine asks it (``engine.ports.runs_here``) before it launches a python attempt in
process; where the answer is no, the attempt is left READY and claimable for a worker.
"""

from __future__ import annotations

import atexit
import importlib
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor, Future, wait
from typing import Any

from whimbrel.contract.errors import LaunchError, LaunchHandedBack
from whimbrel.engine import LaunchRequest

log = logging.getLogger("whimbrel.launch.python")

#: Runs one activity to its end: (request, function) -> None. Supplied by the client,
#: which wires it to the worker helpers (launch sits below worker in the layers).
Runner = Callable[[LaunchRequest, Callable[..., Any]], None]

#: How long a thread promised to a launch stays promised when no start follows.
PROMISE_SECONDS = 10.0

#: How long a target found not importable is not tried again (``whimbrel dev``'s scope).
IMPORT_RETRY_SECONDS = 30.0


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


# -- the interpreter is exiting: no process is a worker any more --------------------------

_exiting = threading.Event()


def _on_exit() -> None:
    _exiting.set()


# Threading's exit hooks run when the main thread ends, before concurrent.futures joins
# its worker threads (they are called last registered first): from then on, what an
# activity still finishing readies is left for a worker, not handed to a pool that is
# going away. atexit as well, for an interpreter without the private hook.
getattr(threading, "_register_atexit", lambda fn: None)(_on_exit)
atexit.register(_on_exit)


def interpreter_exiting() -> bool:
    return _exiting.is_set() or sys.is_finalizing()


class WorkerScope:
    """What python code this process runs (python activities, code workflows'
    decisions): the targets of the workflows its client
    registered or started (``add_targets``), every target of the modules a worker
    serves (``add_modules``: ``run_worker``, ``whimbrel worker --module``), or, with
    ``importable``, any target it can import (``whimbrel dev``). Once closed (the client
    began to close) or while the interpreter exits it runs nothing.
    """

    def __init__(self, *, importable: bool = False) -> None:
        self.importable = importable
        self._targets: set[str] = set()
        self._modules: set[str] = set()
        self._closed = False
        self._lock = threading.Lock()
        #: Targets found not importable, with when (``importable`` only).
        self._missing: dict[str, float] = {}

    def add_targets(self, targets: Iterable[str]) -> None:
        with self._lock:
            self._targets.update(targets)

    def add_modules(self, modules: Iterable[str]) -> None:
        with self._lock:
            self._modules.update(modules)

    def close(self) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed or interpreter_exiting()

    @property
    def empty(self) -> bool:
        return not (self._targets or self._modules or self.importable)

    def covers(self, target: str) -> bool:
        """Whether this process runs ``target`` (``module:function``) now."""
        if self.closed:
            return False
        module = target.partition(":")[0]
        with self._lock:
            if target in self._targets or module in self._modules:
                return True
            if not self.importable:
                return False
            failed = self._missing.get(target)
        if failed is not None and time.monotonic() - failed < IMPORT_RETRY_SECONDS:
            return False
        try:
            resolve_target(target)
        except LaunchError:
            with self._lock:
                self._missing[target] = time.monotonic()
            return False
        return True

    def claim_prefixes(self) -> list[str]:
        """The ``claimable`` key prefixes (``<module>/<function>/…``, store/keys.py) a
        claim of this scope reads: one per module, "" for ``importable`` (everything,
        each candidate then asked :meth:`covers`)."""
        with self._lock:
            if self.importable:
                return [""]
            modules = self._modules | {t.partition(":")[0] for t in self._targets}
        return sorted(f"{m}/" for m in modules)


class PythonLauncher:
    """Hands each activity to ``executor``; the function gets an ``ActivityRun``.

    ``scope`` says what this process is a worker for (the engine asks :meth:`runs`).
    Attempts it holds (launched or claimed, not ended) are tracked, so that a closing
    client finishes or hands back each (:meth:`drain`), and so that it never holds more
    than ``capacity``: a full process answers :meth:`runs` with no, and the engine leaves
    the attempt READY and claimable, for this process's claim loop (or another worker)
    to take once a thread is free. An attempt is RUNNING only once a thread can run it,
    so its heartbeat time-out never fires while it waits in the executor's queue.
    """

    #: Its activities run in this process (see ``engine.ports.runs_in_process``).
    in_process = True

    def __init__(self, executor: Executor, runner: Runner,
                 scope: WorkerScope | None = None, *, capacity: int | None = None) -> None:
        if capacity is not None and capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self.executor = executor
        self.runner = runner
        self.scope = scope or WorkerScope()
        #: Attempts this process holds at most (None: no bound, a caller's executor).
        self.capacity = capacity
        #: Activities whose runner raised (each logged with its traceback): a metric of
        #: trouble that escaped the worker's own handling, e.g. an end not recorded.
        self.failures = 0
        self._lock = threading.Lock()
        self._held: dict[Future[None], str] = {}
        #: Threads promised to launches decided but not started yet (monotonic times):
        #: the check and the start are a write apart, and a run's roots are decided in
        #: parallel. A promise not kept (the write was lost) lapses after a while.
        self._promised: deque[float] = deque()
        #: Attempts whose function has not returned yet (submitted or running): what
        #: ``capacity`` bounds. Its end's write and follow-ups (which may launch the next
        #: attempt: a map's lane, a chain's next step) no longer count.
        self._busy: set[str] = set()

    def runs(self, config: Mapping[str, object]) -> bool:
        """Whether this process is a worker for the target in ``config`` now."""
        return self.scope.covers(str(config.get("target", "")))

    def takes(self, config: Mapping[str, object]) -> bool:
        """Whether this process launches an attempt of the target in ``config`` now: a
        worker for it with a thread free, which is promised to that launch (``start``
        keeps the promise)."""
        return self.runs(config) and self.reserve()

    def reserve(self) -> bool:
        """Promise a thread to an attempt about to start here; False when full."""
        if self.capacity is None:
            return True
        with self._lock:
            now = time.monotonic()
            while self._promised and self._promised[0] < now - PROMISE_SECONDS:
                self._promised.popleft()
            if len(self._busy) + len(self._promised) >= self.capacity:
                return False
            self._promised.append(now)
            return True

    def unreserve(self) -> None:
        """Take back a promise that no start follows (nothing was claimed)."""
        with self._lock:
            if self._promised:
                self._promised.popleft()

    def decides(self, code: str) -> bool:
        """Whether this process is a worker for the code workflow whose function is
        ``code`` (``module:qualname``) now: its decisions are made here, else left
        claimable for a worker (engine/code_handoff.py). Not bounded by ``capacity``:
        a decision runs on the thread that takes it, not on the activity threads."""
        return self.scope.covers(code)

    @property
    def full(self) -> bool:
        """Whether this process holds (or has promised) ``capacity`` attempts already."""
        if self.capacity is None:
            return False
        with self._lock:
            return len(self._busy) + len(self._promised) >= self.capacity

    def serve(self, config: Mapping[str, object]) -> None:
        """Be a worker for the target in ``config`` from now on (a step that a code
        workflow's decision in this process asked for: its function is imported here)."""
        target = str(config.get("target", ""))
        if target and not self.scope.closed:
            self.scope.add_targets([target])

    def launch(self, request: LaunchRequest) -> None:
        self.start(request)

    def start(self, request: LaunchRequest) -> Future[None]:
        """Run an attempt this process moved to RUNNING (launched, or claimed by a
        worker) on the executor; the future ends with it.

        Raises:
            LaunchError: the target cannot be imported.
            LaunchHandedBack: the executor takes nothing more (the client closed, or the
                interpreter is exiting: its thread pools refuse new work).
        """
        func = resolve_target(str(request.config["target"]))
        with self._lock:
            try:
                done = self.executor.submit(self._run, request, func)
            except RuntimeError as exc:  # "cannot schedule new futures after ... shutdown"
                raise LaunchHandedBack(f"this process takes no more work ({exc}); left "
                                       "for a worker") from exc
            self._held[done] = request.activity_exec_id
            self._busy.add(request.activity_exec_id)
            if self._promised:
                self._promised.popleft()  # the promise made for it is kept
        done.add_done_callback(self._forget)
        return done

    @property
    def held(self) -> int:
        """Attempts launched or claimed here that have not ended."""
        with self._lock:
            return len(self._held)

    def wait_idle(self, wait_seconds: float) -> bool:
        """Wait up to ``wait_seconds`` for every attempt held here to end; True if none
        is left."""
        with self._lock:
            held = list(self._held)
        return not wait(held, timeout=wait_seconds).not_done if held else True

    def drain(self, wait_seconds: float) -> list[str]:
        """Stop taking work; cancel what has not started (returned: the attempts to hand
        back) and give what runs up to ``wait_seconds`` to end."""
        self.scope.close()
        with self._lock:
            held = dict(self._held)
        unstarted = [aeid for fut, aeid in held.items() if fut.cancel()]
        running = [fut for fut in held if not fut.cancelled()]
        if running and wait_seconds > 0:
            wait(running, timeout=wait_seconds)
        return unstarted

    def _forget(self, done: Future[None]) -> None:
        with self._lock:
            aeid = self._held.pop(done, None)
            self._busy.discard(aeid or "")

    def _returned(self, aeid: str) -> None:
        with self._lock:
            self._busy.discard(aeid)

    def _run(self, request: LaunchRequest, func: Callable[..., Any]) -> None:
        aeid = request.activity_exec_id

        def counted(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            finally:
                self._returned(aeid)

        try:
            self.runner(request, counted)
        except BaseException:  # the runner recorded the failure; keep the pool alive
            with self._lock:
                self.failures += 1
            log.exception("python activity %s raised", aeid)
