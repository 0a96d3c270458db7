"""A python worker's loop: claim the python work other processes left for this one
(engine/handover.py) and run it, up to ``concurrency`` at once; the same read takes the
decisions of code runs left for a worker (engine/code_handoff.py), made on this thread.

The same loop serves a client for the workflows it registered or started (in the
background, while it lives), ``Whimbrel.run_worker`` (in the foreground, for its modules)
and ``whimbrel dev`` (for what it can import). Idle, it polls less and less often, from
``MIN_WAIT_SECONDS`` up to ``max_wait`` (one request per table per poll: the store reads
all shards of a group at once), so an idle worker costs little CPU and few reads.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future

from whimbrel.contract.errors import LaunchError, WhimbrelError
from whimbrel.contract.launching import LAUNCH_FAILED
from whimbrel.engine import Engine
from whimbrel.launch.python import PythonLauncher

log = logging.getLogger("whimbrel.worker")

#: The first pause after an empty poll; it doubles on each further empty one.
MIN_WAIT_SECONDS = 0.05
#: The longest pause between two polls of an idle worker (``run_worker``).
MAX_WAIT_SECONDS = 1.0


class ClaimLoop:
    """Polls for python work ``launcher.scope`` covers and runs each claimed attempt on
    the launcher's executor, at most ``concurrency`` at once."""

    def __init__(self, engine: Engine, launcher: PythonLauncher, *, concurrency: int,
                 max_wait: float = MAX_WAIT_SECONDS, actor: str = "worker") -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        self.engine = engine
        self.launcher = launcher
        self.concurrency = concurrency
        self.max_wait = max_wait
        self.actor = actor
        self.stopping = threading.Event()
        #: Attempts this loop claimed (a count, for tests and logs).
        self.claimed = 0
        self._slots = threading.BoundedSemaphore(concurrency)
        self._thread: threading.Thread | None = None

    def start(self) -> ClaimLoop:
        """Run the loop on a daemon thread (a client's background worker)."""
        self._thread = threading.Thread(target=self.run, name="whimbrel-claims", daemon=True)
        self._thread.start()
        return self

    def stop(self, join_seconds: float | None = None) -> None:
        self.stopping.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(join_seconds)

    def run(self) -> None:
        """Claim and run until :meth:`stop` (or the scope closes)."""
        wait = MIN_WAIT_SECONDS
        scope = self.launcher.scope
        while not self.stopping.is_set() and not scope.closed:
            if not self._slots.acquire(timeout=self.max_wait):
                # All busy: look again (and at ``stopping``) a little later; a code
                # run's decision runs on this thread, so it need not wait for one.
                self._decide_only()
                continue
            decided = self.engine.handover.decisions_taken
            try:
                took = self._claim_one()
            except (WhimbrelError, OSError) as exc:  # throttled, unreachable: back off
                log.warning("worker claim failed: %s", exc)
                took = False
            if took:
                wait = MIN_WAIT_SECONDS
                continue
            self._slots.release()
            if self.engine.handover.decisions_taken != decided:
                wait = MIN_WAIT_SECONDS  # a code run's decision was taken: not idle
                continue
            if self.stopping.wait(wait):
                break
            wait = min(wait * 2, self.max_wait)

    def _claim_one(self) -> bool:
        """Claim one attempt and start it (its slot is released when it ends)."""
        if not self.launcher.reserve():  # launched in process since: claim when one ends
            self._decide_only()
            return False
        scope = self.launcher.scope
        try:
            item = self.engine.handover.claim_for_worker(scope.claim_prefixes(), scope.covers,
                                                         actor=self.actor)
        except BaseException:
            self.launcher.unreserve()
            raise
        if item is None:
            self.launcher.unreserve()
            return False
        self.claimed += 1
        defn = self.engine.definitions.definition_of(item)
        request = self.engine.launches.launch_request(defn, item)
        try:
            done = self.launcher.start(request)
        except (LaunchError, RuntimeError) as exc:  # the function is gone, or the pool
            self.launcher.unreserve()
            self._slots.release()
            if isinstance(exc, LaunchError):
                self.engine.launches.fail_attempt(item, f"{LAUNCH_FAILED}{exc}",
                                      type(exc).__name__)
            else:  # shutting down: not started, so given back for another worker
                self.engine.handover.hand_back(item.activity_exec_id, str(exc))
            return True
        done.add_done_callback(self._release)
        return True

    def _decide_only(self) -> None:
        """Make the code runs' decisions left for this worker, claiming no attempt."""
        scope = self.launcher.scope
        if self.stopping.is_set() or scope.closed:
            return
        try:
            self.engine.handover.claim_for_worker(scope.claim_prefixes(), scope.covers,
                                                  actor=self.actor, decisions_only=True)
        except (WhimbrelError, OSError) as exc:  # throttled, unreachable: next time
            log.warning("worker poll for decisions failed: %s", exc)

    def _release(self, _done: Future[None]) -> None:
        self._slots.release()
