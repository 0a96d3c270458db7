"""Sweep leases: how any number of sweepers divide the work of a pass
(docs/architecture.md, "Scale"; the ``lease`` table, ``whimbrel/store/leases.py``).

Lease ``sweep#<k>`` gives its holder shard ``j`` of every sparse index the sweep reads
(``timers``, ``reconcile``, ``due_schedules``) with ``j % specs.SWEEP_LEASES == k``. A pass
asks every shard whether anything is due (one request per index, ``select_in``), and takes
the lease of a shard only when it has something to do there (an idle pass writes
nothing); it then reads that shard's page and handles it. A lease another live sweeper
holds is left to it. The pass renews what it holds at half the lease time and releases
everything at its end; a pass that dies leaves its leases to expire
(:data:`SWEEP_LEASE_SECONDS`), after which any sweeper takes them over.

Leases divide work; they do not guard it. Every move the sweep makes stays a conditional
write, so two sweepers on one shard (a holder whose clock runs late, one that lost its
lease mid-pass) only waste reads.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable

from whimbrel.contract.errors import StoreError
from whimbrel.contract.records import LeaseRecord
from whimbrel.engine.lease_port import LeasePort
from whimbrel.engine.ports import StorePort

__all__ = ["SWEEP_LEASE_SECONDS", "SweepLeases", "lease_owner"]

log = logging.getLogger("whimbrel.sweep")

#: How long a sweep lease holds unless renewed: a sweeper that died frees its shards
#: after this; a live one renews at half of it while it sweeps.
SWEEP_LEASE_SECONDS = 60.0


def lease_owner() -> str:
    """A holder name unique to this holder: host, process and a random part (two holders
    in one process, such as two sweeps in two threads, are two owners)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class SweepLeases:
    """The sweep leases of one pass. Used by the pass's own thread only.

    Args:
        store: the tables.
        clock: the time leases are taken, renewed and judged expired by (the engine's
            clock: inject one to drive expiry in tests).
        seconds: how long a lease holds unless renewed.
        owner: the holder's name (default: a new :func:`lease_owner`).
    """

    def __init__(self, store: StorePort, clock: Callable[[], float], *,
                 seconds: float = SWEEP_LEASE_SECONDS, owner: str | None = None) -> None:
        self.lease_port = store.part(LeasePort)
        self.clock = clock
        self.seconds = seconds
        self.owner = owner or lease_owner()
        self._host = socket.gethostname()
        #: Leases held now, with the time each holds until.
        self._until: dict[str, float] = {}
        #: Every lease this pass held at some point, in the order it took them.
        self.taken: list[str] = []
        #: Leases another holder had when this pass wanted them, with that holder.
        self.elsewhere: dict[str, LeaseRecord] = {}
        #: Leases this pass held and lost (it renewed too late: another took them over).
        self.lost: list[str] = []
        #: Leases this pass could not take (throttled past the store's tries), and why.
        self.failed: dict[str, StoreError] = {}

    def hold(self, shard: int | str) -> bool:
        """Whether this pass holds the lease of index shard ``shard`` (taking it now if
        nobody else does). False for a lease held elsewhere or lost in this pass: the
        caller leaves that shard alone."""
        lease_id = self.lease_port.sweep_lease_id(str(shard))
        if lease_id in self._until:
            return self.keep(lease_id)
        if lease_id in self.elsewhere or lease_id in self.lost:
            return False
        if lease_id in self.failed:
            return False
        now = self.clock()
        wanted = LeaseRecord(lease_id, self.owner, until_epoch=now + self.seconds,
                             acquired_epoch=now, host=self._host, pid=os.getpid())
        try:
            got = self.lease_port.acquire_lease(wanted, now)
        except StoreError as exc:
            if not exc.retryable:
                raise  # no lease table, no access: no pass can work; say so
            # Throttled past the store's tries: this shard waits for the next pass.
            self.failed[lease_id] = exc
            return False
        if got.owner != self.owner:
            self.elsewhere[lease_id] = got
            return False
        self._until[lease_id] = got.until_epoch
        self.taken.append(lease_id)
        return True

    def keep(self, lease_id: str) -> bool:
        """Whether ``lease_id`` is still held; renewed first when less than half its time
        is left. False once lost (the caller stops working on its shards)."""
        until = self._until.get(lease_id)
        if until is None:
            return False
        now = self.clock()
        if until - now >= self.seconds / 2:
            return True
        try:
            renewed = self.lease_port.renew_lease(lease_id, self.owner, now + self.seconds)
        except StoreError as exc:
            if not exc.retryable:
                raise
            # Unknown whether it landed: leave the shard for now (the next call tries
            # again; the lease is still given back at the end).
            log.warning("sweep lease %s: could not renew it: %s", lease_id, exc)
            return False
        if renewed:
            self._until[lease_id] = now + self.seconds
            return True
        log.warning("sweep lease %s was taken over: this pass leaves its shards", lease_id)
        del self._until[lease_id]
        self.lost.append(lease_id)
        return False

    def keep_all(self) -> None:
        """Renew every held lease that needs it (between two items of a long pass)."""
        for lease_id in list(self._until):
            self.keep(lease_id)

    def release(self) -> None:
        """Give back every lease held (the end of the pass). A lease that cannot be given
        back now expires by itself."""
        for lease_id in list(self._until):
            try:
                self.lease_port.release_lease(lease_id, self.owner)
            except StoreError as exc:
                log.warning("sweep lease %s: could not give it back (it expires in %s s): "
                            "%s", lease_id, self.seconds, exc)
        self._until.clear()
