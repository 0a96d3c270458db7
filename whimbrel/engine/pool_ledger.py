"""What the pools feature takes and gives back (engine/pools.py): a pool's settings
(cached), a slot (probed in an order fixed by its holder's id), a token of its rate, and
giving a slot back when the write that would have recorded it lost."""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import NotFound
from whimbrel.contract.pools import (
    SLOT_CHECK_SECONDS,
    Bucket,
    PoolInfo,
    base_pool,
    is_keyed_pool,
    is_run_pool,
    probe_order,
    rate_shards,
    shard_choice,
    shard_limits,
    slot_ref,
    take,
    wait_seconds,
)
from whimbrel.engine.pool_port import PoolPort
from whimbrel.engine.ports import StorePort

log = logging.getLogger("whimbrel.pools")

#: How long a process trusts the settings of a pool it read (``set_pool`` elsewhere
#: takes effect within this; in this process at once).
SETTINGS_SECONDS = 5.0
#: Optimistic takes of one rate shard before the actor gives up on it.
TAKE_TRIES = 5

Limits = tuple[int | None, float | None]


class PoolNotFound(NotFound):
    """No pool has this name (``set_pool`` creates one)."""

    def __init__(self, pool: str) -> None:
        super().__init__(f"no pool {pool!r} (create it with Whimbrel.set_pool or "
                         f"`whimbrel pools set {pool}`)", pool=pool)
        self.pool = pool


class Taken:
    """What one admission took: a slot (``k``, ``token``), a token, or neither (held
    until ``retry_at`` for the rate; None: until a slot frees)."""

    def __init__(self, ok: bool, k: int | None = None, token: str | None = None,
                 retry_at: float | None = None) -> None:
        self.ok, self.k, self.token, self.retry_at = ok, k, token, retry_at


class Ledger:
    """Settings, slots and tokens of every pool, for one engine. Thread-safe.

    Args:
        store: the tables.
        wake: called with ``(pool, k)`` when a slot given back may admit a waiter.
    """

    def __init__(self, store: StorePort, wake: Callable[[str, int | None], None]) -> None:
        self.pool_port = store.part(PoolPort)
        self._wake = wake
        self._lock = threading.Lock()
        self._settings: dict[str, tuple[float, PoolInfo | None]] = {}

    # -- settings ----------------------------------------------------------------------

    def settings(self, name: str) -> PoolInfo | None:
        """A pool's settings, read at most every :data:`SETTINGS_SECONDS` (a keyed
        pool's are its pool's: one item, one cache entry, for every key)."""
        name = base_pool(name)
        now = time.monotonic()
        with self._lock:
            cached = self._settings.get(name)
        if cached is not None and now - cached[0] < SETTINGS_SECONDS:
            return cached[1]
        info = self.pool_port.get_pool_settings(name)
        with self._lock:
            self._settings[name] = (now, info)
        return info

    def forget(self, name: str) -> None:
        """Read ``name``'s settings afresh next time (``set_pool`` in this process)."""
        with self._lock:
            self._settings.pop(name, None)

    def limits(self, pool: str, defn: WorkflowDefinition) -> Limits | None:
        """``(slots, per_second)`` of ``pool``; None: nothing to take (no limit, or a pool
        whose settings vanished — a raw DeleteItem — which limits nothing)."""
        if is_run_pool(pool):
            return (defn.max_running, None) if defn.max_running else None
        info = self.settings(pool)
        if info is None:
            log.warning("pool %r has no settings: it limits nothing", pool)
            return None
        if info.slots is None and info.per_second is None:
            return None
        return info.slots, info.per_second

    # -- taking a slot and a token -----------------------------------------------------

    def take(self, pool: str, limits: Limits, holder: str, now: float,
             handed: int | None = None) -> Taken:
        """A slot (``handed`` first: one a release gave this holder), then a token."""
        slots, per_second = limits
        k: int | None = None
        token: str | None = None
        if slots is not None and self.draining(pool, slots):
            return Taken(False)  # a release above the limit admits it when all are free
        if slots is not None:
            order = list(probe_order(slots, holder))
            if handed is not None and handed < slots:
                order = [handed, *(x for x in order if x != handed)]
            token = uuid.uuid4().hex
            # The first slot is written at once (free, usually, in a pool that is not
            # full); when it is held, the others are read first and only a free one is
            # written: a conditional write that fails costs a write unit on a slot that
            # is busy already, a consistent read of the same item half as much and
            # nothing of the key's write capacity.
            def candidates() -> Iterator[int]:
                yield order[0]
                if order[1:]:
                    yield from self.pool_port.free_among(pool, order[1:])

            for cand in candidates() if order else ():
                if self.pool_port.acquire_slot(pool, cand, holder, token, now,
                                                 now + SLOT_CHECK_SECONDS):
                    k = cand
                    break
            if k is None:
                return Taken(False)
        if per_second is not None:
            wait = self.take_token(pool, per_second, holder, now)
            if wait > 0:
                if k is not None:
                    self.pool_port.release_slot(pool, k, holder, token)
                return Taken(False, retry_at=now + wait)
        return Taken(True, k, token)

    def draining(self, pool: str, slots: int) -> bool:
        """Whether slots above a lowered limit are still held: nothing is admitted then
        (held stays at most the limit once it is reached). When they have all drained,
        the settings' ``slots_high`` comes down, so later admissions read nothing more."""
        info = None if is_run_pool(pool) else self.settings(pool)
        high = info.slots_high if info is not None else None
        if not high or high <= slots:
            return False
        above = list(range(slots, high))
        for start in range(0, len(above), 100):  # BatchGetItem takes 100 keys
            part = above[start:start + 100]
            if len(self.pool_port.free_among(pool, part)) < len(part):
                return True
        # A keyed pool's slots above the limit drain by themselves; its admissions keep
        # checking them until the pool's own settle (slots_high is one for all keys).
        if not is_keyed_pool(pool) and self.pool_port.settle_slots_high(pool, high, slots):
            self.forget(pool)
        return False

    def take_token(self, pool: str, per_second: float, holder: str, now: float) -> float:
        """Take one token (0.0), or how long until one is there."""
        shards = rate_shards(per_second)
        rate, capacity = shard_limits(per_second)
        wait = math.inf
        for choice in range(2 if shards > 1 else 1):
            j = shard_choice(shards, holder, choice)
            for _ in range(TAKE_TRIES):
                seen = self.pool_port.get_bucket(pool, j)
                ok, after = take(seen or Bucket(capacity, now), now, rate, capacity)
                if not ok:
                    wait = min(wait, wait_seconds(after, now, rate, capacity))
                    break
                if self.pool_port.put_bucket(pool, j, after, seen):
                    return 0.0
        return wait if math.isfinite(wait) else 1.0 / rate

    def give_back(self, pool: str, taken: Taken, holder: str, recorded: str | None) -> None:
        """A write that would have recorded the slot lost: free it, unless the winner
        (another actor admitting the same holder) recorded this very slot."""
        if taken.k is None or recorded == slot_ref(pool, taken.k):
            return
        if self.pool_port.release_slot(pool, taken.k, holder, taken.token):
            self._wake(pool, taken.k)
