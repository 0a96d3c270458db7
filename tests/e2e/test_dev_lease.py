"""One local runtime per set of tables (issue 19, item 4c): a second ``whimbrel dev`` on
the same tables is refused, naming the first (host, pid, since when); a killed one's
lease is taken over once it expires (the clock injected); a runtime that stalled past
its lease pumps nothing more and stops when another took over."""

from __future__ import annotations

import os
import socket

import pytest

from whimbrel.contract.errors import DevAlreadyRunning
from whimbrel.contract.records import LeaseRecord
from whimbrel.local.devlease import DEV_LEASE_SECONDS
from whimbrel.local.runtime import LocalRuntime
from whimbrel.store import specs
from whimbrel.testing import StepClock


def _runtime(endpoint: str, prefix: str, clock: StepClock) -> LocalRuntime:
    return LocalRuntime(endpoint, prefix, heartbeat_rate_seconds=0, clock=clock)


def test_a_second_runtime_on_the_same_tables_is_refused_by_name(
        ddb_endpoint: str, table_prefix: str) -> None:
    clock = StepClock()
    with _runtime(ddb_endpoint, table_prefix, clock) as first:
        with pytest.raises(DevAlreadyRunning) as refused:
            _runtime(ddb_endpoint, table_prefix, clock).start()
        err = refused.value
        assert (err.host, err.pid, err.since_epoch) == (socket.gethostname(), os.getpid(),
                                                        clock())
        assert f"pid {os.getpid()} on {socket.gethostname()}" in str(err)
        assert table_prefix in str(err) and "--table-prefix" in str(err)
        assert err.to_dict()["error"] == "DevAlreadyRunning"
        # The refused one started nothing and left the first's lease alone.
        lease = first.client.store.get_lease(specs.DEV_LEASE_ID)
        assert lease is not None and lease.owner == first.dev_lease.owner  # type: ignore[union-attr]
        # Other tables on the same endpoint are another matter.
        with _runtime(ddb_endpoint, table_prefix + "other_", clock) as other:
            assert other.pumps
        other.client.store.delete_tables()
    # Stopped, the first gave its lease back: the next starts at once.
    with _runtime(ddb_endpoint, table_prefix, clock) as again:
        assert again.pumps


def test_a_killed_runtimes_lease_is_taken_over_once_it_expires(
        ddb_endpoint: str, table_prefix: str) -> None:
    clock = StepClock()
    with _runtime(ddb_endpoint, table_prefix, clock) as rt:
        store = rt.client.store
    # A dev that was killed (kill -9): its lease stays, with nobody to renew it.
    dead = LeaseRecord(specs.DEV_LEASE_ID, "elsewhere:4242:dead", until_epoch=clock() + 30,
                       acquired_epoch=clock() - 600, host="elsewhere", pid=4242,
                       endpoint=ddb_endpoint)
    assert store.acquire_lease(dead, clock()).owner == dead.owner
    with pytest.raises(DevAlreadyRunning, match="pid 4242 on elsewhere") as refused:
        _runtime(ddb_endpoint, table_prefix, clock).start()
    assert refused.value.until_epoch == dead.until_epoch
    clock.advance(31)
    with _runtime(ddb_endpoint, table_prefix, clock) as taker:
        lease = store.get_lease(specs.DEV_LEASE_ID)
        assert lease is not None and lease.owner == taker.dev_lease.owner  # type: ignore[union-attr]
        assert lease.pid == os.getpid()


def test_a_runtime_that_stalled_past_its_lease_stops_when_another_took_over(
        ddb_endpoint: str, table_prefix: str) -> None:
    clock = StepClock()
    with _runtime(ddb_endpoint, table_prefix, clock) as stalled:
        lease = stalled.dev_lease
        assert lease is not None and lease.valid() and not stalled.stopped
        clock.advance(DEV_LEASE_SECONDS + 1)  # asleep past its lease: it pumps nothing
        assert not lease.valid()
        with _runtime(ddb_endpoint, table_prefix, clock) as taker:
            # Awake, its renewal fails: it knows another runs, and stops.
            assert lease.renew() is False and stalled.stopped
            assert taker.dev_lease is not None and taker.dev_lease.valid()
            held = taker.client.store.get_lease(specs.DEV_LEASE_ID)
            assert held is not None and held.owner == taker.dev_lease.owner
        stalled_store = stalled.client.store
    # Stopping the stalled one did not give away the taker's lease (released at its own
    # stop, which came after).
    assert stalled_store.get_lease(specs.DEV_LEASE_ID) is None


def test_a_runtime_keeps_its_lease_renewed(ddb_endpoint: str, table_prefix: str) -> None:
    clock = StepClock()
    with _runtime(ddb_endpoint, table_prefix, clock) as rt:
        lease = rt.dev_lease
        assert lease is not None
        clock.advance(DEV_LEASE_SECONDS - 1)
        assert lease.renew()
        clock.advance(DEV_LEASE_SECONDS - 1)  # past the first expiry, renewed in time
        assert lease.valid()
        with pytest.raises(DevAlreadyRunning):
            _runtime(ddb_endpoint, table_prefix, clock).start()
