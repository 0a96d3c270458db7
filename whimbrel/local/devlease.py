"""One ``whimbrel dev`` per set of tables: the ``dev`` lease (``lease`` table).

A local runtime replays its tables' streams from the oldest record and feeds them to
the handlers; a second runtime on the same tables (another terminal, another machine
on a shared DynamoDB Local) would do it again and process every record twice. So the
runtime takes the ``dev`` lease before it pumps anything, renews it every third of
:data:`DEV_LEASE_SECONDS`, and gives it back when it stops. A second runtime is refused
with :class:`~whimbrel.contract.errors.DevAlreadyRunning`, naming the holder (host, pid,
since when), when that holder runs on this host.

A runtime that was killed (``kill -9``, a crash) cannot give its lease back. Its
successor does not wait for it to lapse when it can tell (issue 31): the lease names
the holder's host and pid, so a holder on **this** host whose process is gone is taken
over at once (conditional on that very holder still having it). A holder on **another**
host cannot be checked from here: the runtime waits, saying so, until its lease lapses
(it is taken over then) or it is given back, and keeps waiting while it is renewed.

A runtime whose lease lapsed (the process stalled past it: a laptop asleep) pumps
nothing until it has renewed it; if another runtime took it over meanwhile, it stops.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from whimbrel.contract.errors import DevAlreadyRunning, StoreError
from whimbrel.contract.records import LeaseRecord
from whimbrel.engine import lease_owner
from whimbrel.store import specs
from whimbrel.store.store import Store

__all__ = ["DEV_LEASE_SECONDS", "DevLease", "process_alive"]

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
        sleep: how it waits for another host's runtime (tests advance their clock); a
            sleep that returns True (an ``Event.wait`` that was set) ends the wait.
        say: where it tells a person that it waits, or took over a dead holder
            (default: the log).
    """

    def __init__(self, store: Store, clock: Callable[[], float], endpoint: str | None, *,
                 seconds: float = DEV_LEASE_SECONDS,
                 sleep: Callable[[float], object] = time.sleep,
                 say: Callable[[str], object] | None = None) -> None:
        self.store = store
        self.clock = clock
        self.endpoint = endpoint
        self.seconds = seconds
        self.sleep = sleep
        self.say = say or log.warning
        self.owner = lease_owner()
        self.since: float | None = None
        self.until = 0.0
        #: Set when another runtime took the lease over: this one must stop.
        self.lost = threading.Event()

    def acquire(self) -> None:
        """Take the lease: at once when it is free, lapsed, or held by a process of this
        host that is gone; after waiting (``sleep``, saying so with ``say``) when another
        host's runtime holds it.

        Raises:
            DevAlreadyRunning: a live runtime of this host holds it.
        """
        waiting_for: str | None = None
        while True:
            now = self.clock()
            got = self.store.leases.acquire_lease(self._record(now), now)
            if got.owner == self.owner:
                break
            if got.host == socket.gethostname() and not process_alive(got.pid):
                took = self.store.leases.acquire_lease(self._record(now), now, replacing=got.owner)
                if took.owner == self.owner:
                    self.say(f"whimbrel dev: took over tables {self.store.table_prefix}* from "
                             f"pid {got.pid} on this host, which is gone (killed or crashed)")
                    break
                continue  # another runtime took it meanwhile: judge that one
            refused = DevAlreadyRunning(table_prefix=self.store.table_prefix,
                                        endpoint=got.endpoint or self.endpoint, host=got.host,
                                        pid=got.pid, since_epoch=got.acquired_epoch,
                                        until_epoch=got.until_epoch)
            if got.host == socket.gethostname() or not got.owner:
                raise refused
            if waiting_for != got.owner:  # said once per holder, not at every look
                waiting_for = got.owner
                self.say(f"whimbrel dev: waiting for tables {self.store.table_prefix}*: pid "
                         f"{got.pid} on host {got.host} holds them (whether it is alive "
                         f"cannot be checked from here); its lease lapses at "
                         f"{_at(got.until_epoch)} unless it renews it. Ctrl-C gives up")
            # A sleep that answers True was told to stop (dev's SIGTERM): give up.
            if self.sleep(min(self.seconds / 3, max(got.until_epoch - now, 0.0) + 0.01)) \
                    is True:
                raise refused
        self.since, self.until = now, now + self.seconds

    def _record(self, now: float) -> LeaseRecord:
        return LeaseRecord(specs.DEV_LEASE_ID, self.owner, until_epoch=now + self.seconds,
                           acquired_epoch=now, host=socket.gethostname(), pid=os.getpid(),
                           endpoint=self.endpoint)

    def valid(self) -> bool:
        """Whether the lease holds now: a runtime pumps only while it does."""
        return not self.lost.is_set() and self.clock() < self.until

    def renew(self) -> bool:
        """Push the lease out; False (and ``lost`` set) if another runtime has it now."""
        if self.lost.is_set():
            return False
        until = self.clock() + self.seconds
        if self.store.leases.renew_lease(specs.DEV_LEASE_ID, self.owner, until):
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
            self.store.leases.release_lease(specs.DEV_LEASE_ID, self.owner)
        self.since = None


def process_alive(pid: int | None) -> bool:
    """Whether a process ``pid`` runs on this host (this very process included). An
    unknown pid counts as alive: nothing is taken over on a guess."""
    if pid is None or pid <= 0:
        return True
    try:
        os.kill(pid, 0)  # signal 0: only asks whether it could be signalled
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    try:  # Linux: a killed process its parent has not reaped yet is a zombie, dead
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[:1] != ["Z"]
    except OSError:
        return True


def _at(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
