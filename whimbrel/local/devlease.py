"""One ``whimbrel dev`` per set of tables: the ``dev`` lease (``lease`` table).

A local runtime replays its tables' streams from the oldest record and feeds them to
the handlers; a second runtime on the same tables (another terminal, another machine
on a shared DynamoDB Local) would do it again and process every record twice. So the
runtime takes the ``dev`` lease before it pumps anything, renews it every third of
:data:`DEV_LEASE_SECONDS`, and gives it back when it stops. A second runtime is refused
with :class:`~whimbrel.contract.errors.DevAlreadyRunning`, naming the holder (host, pid,
since when); a runtime that was killed frees the lease when it expires.

A runtime whose lease lapsed (the process stalled past it: a laptop asleep) pumps
nothing until it has renewed it; if another runtime took it over meanwhile, it stops.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable

from whimbrel.contract.errors import DevAlreadyRunning, StoreError
from whimbrel.contract.records import LeaseRecord
from whimbrel.engine.leases import lease_owner
from whimbrel.store import specs
from whimbrel.store.store import Store

__all__ = ["DEV_LEASE_SECONDS", "DevLease"]

log = logging.getLogger("whimbrel.local")

#: How long the dev lease holds unless renewed (a killed dev frees it after this).
DEV_LEASE_SECONDS = 30.0


class DevLease:
    """The ``dev`` lease of one runtime.

    Args:
        store: the runtime's tables.
        clock: the time the lease is taken, renewed and judged expired by.
        endpoint: the DynamoDB endpoint, named to a runtime refused next to this one.
        seconds: how long the lease holds unless renewed.
    """

    def __init__(self, store: Store, clock: Callable[[], float], endpoint: str | None, *,
                 seconds: float = DEV_LEASE_SECONDS) -> None:
        self.store = store
        self.clock = clock
        self.endpoint = endpoint
        self.seconds = seconds
        self.owner = lease_owner()
        self.since: float | None = None
        self.until = 0.0
        #: Set when another runtime took the lease over: this one must stop.
        self.lost = threading.Event()

    def acquire(self) -> None:
        """Take the lease.

        Raises:
            DevAlreadyRunning: another live runtime holds it.
        """
        now = self.clock()
        got = self.store.acquire_lease(LeaseRecord(
            specs.DEV_LEASE_ID, self.owner, until_epoch=now + self.seconds, acquired_epoch=now,
            host=socket.gethostname(), pid=os.getpid(), endpoint=self.endpoint), now)
        if got.owner != self.owner:
            raise DevAlreadyRunning(table_prefix=self.store.table_prefix,
                                    endpoint=got.endpoint or self.endpoint, host=got.host,
                                    pid=got.pid, since_epoch=got.acquired_epoch,
                                    until_epoch=got.until_epoch)
        self.since, self.until = now, got.until_epoch

    def valid(self) -> bool:
        """Whether the lease holds now: a runtime pumps only while it does."""
        return not self.lost.is_set() and self.clock() < self.until

    def renew(self) -> bool:
        """Push the lease out; False (and ``lost`` set) if another runtime has it now."""
        if self.lost.is_set():
            return False
        until = self.clock() + self.seconds
        if self.store.renew_lease(specs.DEV_LEASE_ID, self.owner, until):
            self.until = until
            return True
        log.error("another whimbrel dev took over tables %s* (this one stalled past its "
                  "lease): this one stops", self.store.table_prefix)
        self.lost.set()
        return False

    def keep(self, stop: threading.Event) -> None:
        """Renew every third of the lease time until ``stop`` is set or the lease is lost
        (the body of the runtime's lease thread)."""
        while not stop.wait(self.seconds / 3):
            try:
                if not self.renew():
                    stop.set()
                    return
            except StoreError as exc:  # DynamoDB away for a moment: the next tick retries
                log.warning("could not renew the dev lease: %s", exc)

    def release(self) -> None:
        """Give the lease back (the runtime stops)."""
        if self.since is not None and not self.lost.is_set():
            self.store.release_lease(specs.DEV_LEASE_ID, self.owner)
        self.since = None
