"""One local runtime per set of tables (issue 19, item 4c): a second ``whimbrel dev`` on
the same tables is refused, naming the first (host, pid, since when); a killed one's
lease is taken over once it expires (the clock injected); a runtime that stalled past
its lease pumps nothing more and stops when another took over."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

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
        lease = first.client.store.leases.get_lease(specs.DEV_LEASE_ID)
        assert lease is not None and lease.owner == first.dev_lease.owner  # type: ignore[union-attr]
        # Other tables on the same endpoint are another matter.
        with _runtime(ddb_endpoint, table_prefix + "other_", clock) as other:
            assert other.pumps
        other.client.store.delete_tables()
    # Stopped, the first gave its lease back: the next starts at once.
    with _runtime(ddb_endpoint, table_prefix, clock) as again:
        assert again.pumps


def test_another_hosts_lease_is_waited_for_saying_so_and_taken_when_it_lapses(
        ddb_endpoint: str, table_prefix: str) -> None:
    """Issue 31: a holder on another host cannot be checked from here, so dev waits
    (saying so, once) instead of exiting, while the holder renews, and takes over when
    it lapses."""
    clock = StepClock()
    with _runtime(ddb_endpoint, table_prefix, clock) as rt:
        store = rt.client.store
    # A dev on another machine: alive while it renews, then killed.
    remote = LeaseRecord(specs.DEV_LEASE_ID, "elsewhere:4242:x", until_epoch=clock() + 30,
                         acquired_epoch=clock() - 600, host="elsewhere", pid=4242,
                         endpoint=ddb_endpoint)
    assert store.leases.acquire_lease(remote, clock()).owner == remote.owner
    said: list[str] = []
    naps: list[float] = []

    def sleep(seconds: float) -> None:  # time skips; the remote renews twice, then dies
        naps.append(seconds)
        if len(naps) <= 2:
            assert store.leases.renew_lease(specs.DEV_LEASE_ID, remote.owner, clock() + 30)
        clock.advance(seconds)

    with LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0, clock=clock,
                      sleep=sleep, say=said.append) as taker:
        lease = store.leases.get_lease(specs.DEV_LEASE_ID)
        assert lease is not None and lease.owner == taker.dev_lease.owner  # type: ignore[union-attr]
        assert lease.pid == os.getpid()
    assert len(said) == 1 and said[0].startswith(
        f"whimbrel dev: waiting for tables {table_prefix}*: pid 4242 on host elsewhere")
    assert sum(naps) > 30 and max(naps) <= DEV_LEASE_SECONDS / 3
    # Told to stop while it waits (dev's SIGTERM: its sleep is an Event's wait): refused.
    again = dataclasses.replace(remote, until_epoch=clock() + 30)
    assert store.leases.acquire_lease(again, clock()).owner == remote.owner
    with pytest.raises(DevAlreadyRunning, match="pid 4242 on elsewhere"):
        LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0, clock=clock,
                     sleep=lambda s: True, say=said.append).start()


def test_a_dead_holder_on_this_host_is_taken_over_at_once(
        ddb_endpoint: str, table_prefix: str) -> None:
    """Issue 31: after kill -9 of dev, a restarted one exited for up to 30 s naming the
    dead pid. The lease names host and pid: a pid gone from this host is taken over now
    (the clock does not move), a live one is still refused."""
    clock = StepClock()
    with _runtime(ddb_endpoint, table_prefix, clock) as rt:
        store = rt.client.store
    here = socket.gethostname()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        held = LeaseRecord(specs.DEV_LEASE_ID, f"{here}:{live.pid}:x", until_epoch=clock() + 30,
                           acquired_epoch=clock(), host=here, pid=live.pid,
                           endpoint=ddb_endpoint)
        assert store.leases.acquire_lease(held, clock()).owner == held.owner
        with pytest.raises(DevAlreadyRunning, match=f"pid {live.pid} on {here}"):
            _runtime(ddb_endpoint, table_prefix, clock).start()
        live.kill()  # kill -9
        live.wait()
        said: list[str] = []
        with LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0, clock=clock,
                          sleep=lambda s: pytest.fail("waited"), say=said.append) as taker:
            lease = store.leases.get_lease(specs.DEV_LEASE_ID)
            assert lease is not None and lease.owner == taker.dev_lease.owner  # type: ignore[union-attr]
        assert said == [f"whimbrel dev: took over tables {table_prefix}* from pid {live.pid} "
                        "on this host, which is gone (killed or crashed)"]
    finally:
        if live.poll() is None:
            live.kill()
            live.wait()


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
            held = taker.client.store.leases.get_lease(specs.DEV_LEASE_ID)
            assert held is not None and held.owner == taker.dev_lease.owner
        stalled_store = stalled.client.store
    # Stopping the stalled one did not give away the taker's lease (released at its own
    # stop, which came after).
    assert stalled_store.leases.get_lease(specs.DEV_LEASE_ID) is None


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


WHIMBREL = str(Path(sys.executable).with_name("whimbrel"))


def _dev(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[str], str]:
    """``whimbrel dev`` on the test's DynamoDB Local, in a child process, and its banner
    (read until "Ctrl-C stops."; a dev that ends first fails the test)."""
    proc = subprocess.Popen([WHIMBREL, "dev", "--heartbeat-rate", "1"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=log.open("w"))
    guard = threading.Timer(120, proc.kill)  # a dev that never gets going must not hang
    guard.start()
    banner = ""
    try:
        assert proc.stdout is not None
        while "Ctrl-C stops." not in banner:
            line = proc.stdout.readline()
            assert line, f"whimbrel dev ended (exit {proc.wait()}):\n{banner}{log.read_text()}"
            banner += line
    finally:
        guard.cancel()
    return proc, banner


def test_whimbrel_dev_restarted_after_kill_9_takes_over_at_once(
        ddb_endpoint: str, table_prefix: str, tmp_path: Path) -> None:
    """The real processes: ``whimbrel dev``, ``kill -9``, ``whimbrel dev`` again. The
    second starts (it does not exit 1 for 30 s) and says whose lease it took."""
    env = {**os.environ, "WHIMBREL_ENDPOINT_URL": ddb_endpoint,
           "WHIMBREL_TABLE_PREFIX": table_prefix, "POWERTOOLS_METRICS_DISABLED": "true",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                          os.environ.get("PYTHONPATH", "")])}
    first, _ = _dev(env, tmp_path / "first.log")
    second: subprocess.Popen[str] | None = None
    try:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        second, banner = _dev(env, tmp_path / "second.log")
        assert (f"whimbrel dev: took over tables {table_prefix}* from pid {first.pid} on "
                "this host, which is gone (killed or crashed)") in banner
        second.terminate()
        assert second.wait(timeout=60) == 0, (tmp_path / "second.log").read_text()
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
