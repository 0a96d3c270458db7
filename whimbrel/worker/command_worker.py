"""A long-running worker for ``external`` activities in any language: claim an attempt,
run a command for it, record its end; again, ``concurrency`` at a time, until stopped.

What ``whimbrel worker --workflow NAME -- COMMAND ARGS…`` runs (the CLI only parses its
options). Per attempt the command gets:

- the attempt's input as JSON on stdin, or in a file named by ``WHIMBREL_INPUT_FILE``
  (``input_file=True``: stdin is then empty);
- the ids in its environment (``WHIMBREL_ACTIVITY_EXEC_ID``, ``WHIMBREL_ACTIVITY_NAME``,
  ``WHIMBREL_WORKFLOW_EXEC_ID``, ``WHIMBREL_WORKFLOW_NAME``, ``WHIMBREL_ATTEMPT``, the
  table prefix and endpoint), as ``whimbrel exec`` gives them.

Exit code 0 completes the attempt with stdout as its output (parsed as JSON; text that
is not JSON is kept as one string; nothing is null). Any other exit code fails it with
the code and the tail of stderr, and the activity's retry policy decides what follows.
While the command runs the attempt heartbeats (when its activity has a heartbeat
timeout); a cancel or time-out stops the command (SIGTERM, then SIGKILL).

One process polls instead of one process per attempt: an idle worker asks for work
every ``poll_min`` seconds at first, backing off to every ``poll_max`` (a poll is one
request: the claimable index of ``activity_exec``, every shard in one statement), and
claims when work is there. Stopping (``stop()``, or SIGTERM/SIGINT with
``handle_signals``) claims nothing more and lets the running commands finish for up to
``stop_grace_seconds``; what still runs then (or at a second signal) is handed back:
its command is stopped and the attempt FAILED with the error type ``WorkerStopped``,
so its retry policy starts the next attempt for another worker (the contract has no
way back to READY).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import FrameType
from typing import IO, Any

from whimbrel.contract.errors import ActivityStopped, InvalidInput, StoreError
from whimbrel.engine import ActivityExec, Engine
from whimbrel.settings import activity_environment
from whimbrel.store.store import Store
from whimbrel.worker.command import STDERR_TAIL_LINES, CommandFailed, stop_process
from whimbrel.worker.run import ActivityRun, run_activity

log = logging.getLogger("whimbrel.worker")

ENV_INPUT_FILE = "WHIMBREL_INPUT_FILE"
ENV_ATTEMPT = "WHIMBREL_ATTEMPT"
#: Seconds between two polls: the first pause after work, and the longest once idle
#: (docs/benchmarks.md: pick-up latency and idle CPU at these values).
POLL_MIN_SECONDS = 0.05
POLL_MAX_SECONDS = 0.1
#: Every this many polls an idle worker also looks at ``map_item``'s claimable index.
ITEM_TABLE_EVERY = 8
#: The error type of an attempt handed back by a worker that stopped.
WORKER_STOPPED = "WorkerStopped"


class WorkerStopped(Exception):
    """The worker stopped before the command ended; the attempt is handed back."""

    concise = True


@dataclass(frozen=True)
class WorkerStats:
    """What a worker did, for its log line when it stops and for tests."""

    claimed: int
    completed: int
    failed: int
    handed_back: int
    polls: int


class CommandWorker:
    """Claims attempts of one workflow (and activity) and runs ``argv`` for each.

    Args:
        engine: the engine of a client (``Whimbrel.engine``).
        argv: the command and its arguments, run once per attempt.
        workflow_name: claim attempts of this workflow only.
        activity_name: and of this activity only (None: any external one).
        concurrency: attempts run at once.
        input_file: hand the input in a file (``WHIMBREL_INPUT_FILE``), not on stdin.
        env: the commands' environment (default: this process's), plus the ids.
        table_prefix / endpoint_url: passed on to the commands' environment.
        poll_min / poll_max: seconds between two polls when idle, doubling from the
            first to the second while nothing comes.
        stop_grace_seconds: how long running commands may go on after a stop.
        kill_grace_seconds: between SIGTERM and SIGKILL when a command must stop.
        actor: recorded in the history of the claims.

    Raises:
        InvalidInput: an empty command, or a bound below its minimum.
    """

    def __init__(self, engine: Engine, argv: Sequence[str], *, workflow_name: str,
                 activity_name: str | None = None, concurrency: int = 1,
                 input_file: bool = False, env: Mapping[str, str] | None = None,
                 table_prefix: str = "", endpoint_url: str | None = None,
                 poll_min: float = POLL_MIN_SECONDS, poll_max: float = POLL_MAX_SECONDS,
                 stop_grace_seconds: float = 25.0, kill_grace_seconds: float = 5.0,
                 actor: str = "worker") -> None:
        if not argv:
            raise InvalidInput("no command to run for each attempt", field="argv")
        if concurrency < 1:
            raise InvalidInput(f"concurrency must be at least 1, not {concurrency}",
                               field="concurrency")
        if not 0 < poll_min <= poll_max:
            raise InvalidInput(f"poll_min ({poll_min}) must be > 0 and <= poll_max "
                               f"({poll_max})", field="poll_min")
        self.engine = engine
        self.argv = list(argv)
        self.workflow_name = workflow_name
        self.activity_name = activity_name
        self.concurrency = concurrency
        self.input_file = input_file
        self.env = dict(os.environ if env is None else env)
        self.table_prefix = table_prefix
        self.endpoint_url = endpoint_url
        self.poll_min = poll_min
        self.poll_max = poll_max
        self.stop_grace_seconds = stop_grace_seconds
        self.kill_grace_seconds = kill_grace_seconds
        self.actor = actor
        self._stopping = threading.Event()
        self._hand_back = threading.Event()
        self._slots = threading.Semaphore(concurrency)
        self._lock = threading.Lock()
        self._counts = collections.Counter[str]()
        self._prefix = f"{workflow_name}/" + (f"{activity_name}/" if activity_name else "")
        self._shards = [*engine.store.priority_claim_shards, *engine.store.claim_shards]
        self._peeks = 0
        #: Whether the last poll claimed something (the next one skips the look).
        self._took_last = False
        #: Called with each claimed attempt before its command starts (tests, logging).
        self.on_claim: Callable[[ActivityExec], None] | None = None

    # -- lifetime ------------------------------------------------------------------------

    def stop(self, *, hand_back: bool = False) -> None:
        """Claim nothing more; with ``hand_back`` also stop what runs now (else it may
        finish within ``stop_grace_seconds``). Safe from any thread or a signal handler."""
        self._stopping.set()
        if hand_back:
            self._hand_back.set()

    @property
    def stats(self) -> WorkerStats:
        with self._lock:
            c = self._counts
            return WorkerStats(claimed=c["claimed"], completed=c["completed"],
                               failed=c["failed"], handed_back=c["handed_back"],
                               polls=c["polls"])

    def run(self, *, handle_signals: bool = False) -> WorkerStats:
        """Claim and run attempts until :meth:`stop` (or, with ``handle_signals`` in the
        main thread, SIGTERM or SIGINT: the first drains, a second hands back at once).
        Returns when every command it started has ended and its attempt is recorded."""
        previous: dict[int, Any] = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, self._on_signal)
        pool = ThreadPoolExecutor(max_workers=self.concurrency,
                                  thread_name_prefix="whimbrel-worker")
        try:
            self._loop(pool)
            self._drain()
        finally:
            pool.shutdown(wait=True)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return self.stats

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop(hand_back=self._stopping.is_set())

    def _drain(self) -> None:
        """Wait for the running commands: up to the grace, then hand them back."""
        deadline = time.monotonic() + self.stop_grace_seconds
        for _ in range(self.concurrency):
            while not self._slots.acquire(timeout=0.1):
                if time.monotonic() >= deadline:
                    self._hand_back.set()
        for _ in range(self.concurrency):
            self._slots.release()

    # -- claiming ------------------------------------------------------------------------

    def _loop(self, pool: ThreadPoolExecutor) -> None:
        pause = self.poll_min
        while not self._stopping.is_set():
            if not self._slots.acquire(timeout=0.5):
                continue  # every slot busy: look again (or notice the stop)
            if self._stopping.is_set():
                # A stop came while this waited for a slot (the slot may have been freed
                # by the very hand-back it asked for): claim nothing more.
                self._slots.release()
                break
            try:
                act = self._claim()
            except StoreError as exc:
                if not exc.retryable:  # no such table, access denied: say so and stop
                    self._slots.release()
                    self.stop()
                    raise
                log.warning("claim for %s failed: %s", self._prefix, exc)
                act = None  # throttling, a brief outage: back off, go on
            if act is None:
                self._slots.release()
                self._stopping.wait(pause)
                pause = min(pause * 2, self.poll_max)
                continue
            pause = self.poll_min
            self._count("claimed")
            pool.submit(self._run_released, act)

    def _claim(self) -> ActivityExec | None:
        """One poll: a look at the claimable index, and a claim only when it holds
        something for us (the claim reads the shards in its own order). Right after a
        claim that took something, no look: the look names every shard, and a key that
        every claim reads caps the claims of the account (docs/architecture.md, "Scale");
        an idle worker's look is one cheap request instead of a claim's two to four."""
        self._count("polls")
        if not self._took_last and not self._anything_claimable():
            return None
        claimed = self.engine.claims.claim(self.workflow_name, self.activity_name, actor=self.actor)
        self._took_last = claimed is not None
        return ActivityExec.from_record(claimed) if claimed is not None else None

    def _anything_claimable(self) -> bool:
        """Whether the ``claimable`` index holds an attempt under our prefix: one request
        (every shard of ``activity_exec`` in one PartiQL statement, keys only); every
        ``ITEM_TABLE_EVERY``-th poll ``map_item``'s too (external map items, rarer, wait
        at most that many polls longer). Eventually consistent, as the claim is."""
        store = self.engine.store
        self._peeks += 1
        if isinstance(store, Store) and self._peeks % ITEM_TABLE_EVERY:
            got = store.tables.select_in(store.tables.activity_table, "claimable", "claim_shard",
                                         self._shards, where=' AND begins_with("claim_key", ?)',
                                         values=[{"S": self._prefix}], projection='"claim_key"',
                                         limit=1)
            if got is not None:
                items, more = got
                return bool(items) or more
        return bool(store.claimable_among(self._shards, self._prefix, 1))

    def _count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    # -- one attempt ---------------------------------------------------------------------

    def _run_released(self, act: ActivityExec) -> None:
        try:
            if self.on_claim is not None:
                self.on_claim(act)
            self._run_one(act)
        except Exception:  # recorded on the attempt already; the worker goes on
            log.exception("attempt %s", act.activity_exec_id)
        finally:
            self._slots.release()

    def _run_one(self, act: ActivityExec) -> None:
        outcome = "failed"
        try:
            with run_activity(self.engine, act.activity_exec_id) as run:
                run.output = self._supervise(run, act)
                outcome = "completed"
        except (CommandFailed, ActivityStopped):
            pass
        except WorkerStopped:
            outcome = "handed_back"
        except FileNotFoundError as exc:  # recorded FAILED by run_activity
            log.error("cannot run %r: %s", self.argv[0], exc.strerror)
        self._count(outcome)

    def _supervise(self, run: ActivityRun, act: ActivityExec) -> Any:
        """Run the command for ``run``; its output, or raise how it ended."""
        env = {**self.env, **activity_environment(
            activity_exec_id=act.activity_exec_id, activity_name=act.activity_name,
            workflow_exec_id=act.workflow_exec_id, workflow_name=act.workflow_name,
            table_prefix=self.table_prefix, endpoint_url=self.endpoint_url),
            ENV_ATTEMPT: str(act.attempt)}
        payload = json.dumps(run.input)
        with tempfile.TemporaryDirectory(prefix="whimbrel-input-") as tmp:
            if self.input_file:
                path = os.path.join(tmp, "input.json")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(payload)
                env[ENV_INPUT_FILE] = path
            proc = subprocess.Popen(
                self.argv, env=env, start_new_session=True, text=True, errors="replace",
                stdin=subprocess.DEVNULL if self.input_file else subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            out: list[str] = []
            tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
            readers = [threading.Thread(target=_read_all, args=(proc.stdout, out.append),
                                        daemon=True),
                       threading.Thread(target=_read_all, args=(proc.stderr, tail.append),
                                        daemon=True)]
            if not self.input_file:
                readers.append(threading.Thread(target=_write_all, args=(proc.stdin, payload),
                                                daemon=True))
            for t in readers:
                t.start()
            code = self._wait(proc, run)
            for t in readers:
                t.join(timeout=5)
        if code != 0:
            raise CommandFailed(code, "".join(tail).rstrip())
        return _output("".join(out))

    def _wait(self, proc: subprocess.Popen[str], run: ActivityRun) -> int:
        """The command's exit code; stops it (and raises) on a cancel, a time-out or a
        hand-back."""
        while True:
            try:
                return proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass
            if run.stop_requested is not None:
                stop_process(proc, self.kill_grace_seconds)
                raise run.stop_requested
            if self._hand_back.is_set():
                stop_process(proc, self.kill_grace_seconds)
                raise WorkerStopped("the worker stopped before the command ended (handed "
                                    "back: the retry policy runs the next attempt)")


def _output(stdout: str) -> Any:
    """stdout as the attempt's output: JSON when it parses, else the text; empty: None."""
    text = stdout.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _read_all(stream: IO[str] | None, sink: Callable[[str], None]) -> None:
    assert stream is not None
    for line in stream:
        sink(line)


def _write_all(stream: IO[str] | None, payload: str) -> None:
    """The input on the command's stdin, then EOF; a command that does not read it
    (closed stdin, exited early) is not an error."""
    assert stream is not None
    try:
        stream.write(payload)
        stream.close()
    except (BrokenPipeError, OSError):
        pass
