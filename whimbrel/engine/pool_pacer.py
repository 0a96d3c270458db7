"""In-process pacer looks of rate-limited pools (engine/pools.py; issue 31).

An attempt over its pool's rate waits for a token, and nothing else wakes it when the
work is shorter than the gap between tokens: every attempt admitted ends before the
next token is there, so no end finds one. The sweep's pacer look (the ``pool_checks``
index) is the fallback that survives any process, but it comes at the sweep's pace — 5 s
in ``whimbrel dev``, a minute deployed — so short work used a rate of 10/s at 2/s or
less. So the process that held the waiter also looks itself, when the token is due: a
thread of its own, alive only while a look is armed, wakes the pool then; a waiter held
again arms the next look, so a live process paces waiters at the rate itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("whimbrel.pools")

#: A look armed this close after now is due (the float rounding of epoch seconds).
DUE_SLACK_SECONDS = 1e-6
#: The longest the pacer thread waits before it reads the clock again (an injected
#: clock that jumps is seen this late at most).
MAX_WAIT_SECONDS = 0.25


class Pacer:
    """The pacer looks this process owes, by pool. Thread-safe.

    Args:
        clock: the engine's clock.
        wake: called with a pool's name when its look is due (admits waiters while
            tokens last).
    """

    def __init__(self, clock: Callable[[], float], wake: Callable[[str], None]) -> None:
        self._clock = clock
        self._wake = wake
        self._due: dict[str, float] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, pool: str, at: float) -> None:
        """Look at ``pool``'s waiters at ``at`` (an earlier look already armed stays)."""
        with self._cond:
            if pool not in self._due or at < self._due[pool]:
                self._due[pool] = at
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="whimbrel-pacer",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def armed(self, pool: str) -> float | None:
        """When ``pool``'s look is armed (None: not armed)."""
        with self._cond:
            return self._due.get(pool)

    def run_due(self) -> list[str]:
        """Wake every pool whose look is due now; the pools woken."""
        now = self._clock()
        with self._cond:
            pools = sorted(p for p, at in self._due.items() if at <= now + DUE_SLACK_SECONDS)
            for pool in pools:
                del self._due[pool]
        for pool in pools:
            try:
                self._wake(pool)
            except Exception as exc:  # a look that fails is the sweep's again
                log.warning("pacer look of pool %s: %s: %s", pool, type(exc).__name__, exc)
        return pools

    def _loop(self) -> None:
        while True:
            self.run_due()
            with self._cond:
                if not self._due:
                    self._thread = None  # armed again: a new thread
                    return
                wait = min(self._due.values()) - self._clock()
                self._cond.wait(min(max(wait, 0.001), MAX_WAIT_SECONDS))
