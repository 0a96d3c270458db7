"""``Whimbrel``: the public facade over the engine, the store and the launchers.

The methods live by concern in ``_runs.py`` (runs), ``_activities.py`` (activities),
``_notify.py`` (events), ``_waits.py`` (signals, approvals, suspend/resume),
``_data.py`` (redrive), ``_schedules.py``, ``_pools.py`` and ``batch.py`` (batch
operations); this module holds the
setup: settings, tables, definitions, launchers, lifetime.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from whimbrel.client import query
from whimbrel.client._activities import Activities
from whimbrel.client._data import DataFlows
from whimbrel.client._notify import Notifications
from whimbrel.client._pools import Pools
from whimbrel.client._runs import Runs
from whimbrel.client._schedules import Schedules
from whimbrel.client._waits import Waits
from whimbrel.client._worker import CLOSE_WAIT_SECONDS, Workers
from whimbrel.client.batch import Batches
from whimbrel.client.query import DefinitionVersion
from whimbrel.client.queued import QueuedExecutor
from whimbrel.contract.code import CodeWorkflow
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import WhimbrelError
from whimbrel.contract.limits import DEFAULT_PAYLOAD_MAX_BYTES, DEFAULT_PAYLOAD_THRESHOLD_BYTES
from whimbrel.engine import Clock, CodeRuns, Engine, EngineMetrics, Intake, Launcher, LaunchRequest
from whimbrel.launch.command import CommandLauncher
from whimbrel.launch.python import PythonLauncher, WorkerScope
from whimbrel.observe.emf import EmfMetrics
from whimbrel.settings import (
    DEFAULT_PAYLOAD_PREFIX,
    DEFAULT_RETENTION_DAYS,
    DEFAULT_TABLE_PREFIX,
    Settings,
    parse_retention_days,
)
from whimbrel.store.memory import MemoryDynamoDB
from whimbrel.store.meter import CapacityMeter
from whimbrel.store.store import Store
from whimbrel.store.transport import Transport
from whimbrel.worker.command import run_command
from whimbrel.worker.run import run_activity

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config


class Whimbrel(Runs, Activities, Notifications, Waits, DataFlows, Schedules, Pools, Workers,
               Batches):
    """Entry point of the Full Logic API (and, through the same store, everything else).

    Args:
        endpoint_url: DynamoDB endpoint; None means real AWS.
        table_prefix: prefix of every table name.
        region: AWS region (default: ``boto3_session``'s, else from ``AWS_REGION`` /
            ``AWS_DEFAULT_REGION``).
        clock: returns epoch seconds; inject one to drive time in tests.
        launchers: extra or replacement launchers by kind (``lambda``, ``sqs``, …).
        max_workers: threads for ``python`` and ``command`` activities of this process;
            it holds at most this many python attempts (more are left claimable until a
            thread is free, never RUNNING in a queue where their heartbeat would lapse).
        executor: runs those activities instead of a pool of ``max_workers`` threads
            (e.g. one that tracks or bounds them).
        actor: recorded in the history of every move this client makes.
        retention_days: how long ended runs are kept when their definition does not say
            (None: forever).
        metrics: told of every workflow and activity end this client's engine makes,
            e.g. ``whimbrel.observe.EmfMetrics`` (None: no metrics).
        boto3_session: a ``boto3.session.Session`` for credentials, profile and region
            (None: a shared default session), as Powertools' idempotency layer takes it.
        botocore_config: a ``botocore.config.Config`` (proxies, CA bundle, retries,
            timeouts, FIPS/dual-stack endpoints); Whimbrel adds only what it leaves unset.
        transport: the store's transport, ``auto`` (default: the lean client unless it
            cannot honour the config), ``lean`` or ``botocore`` (docs/operations.md); or a
            transport object every request goes to (:meth:`in_memory` passes the twin).
        payload_bucket: an S3 bucket that keeps every payload (input, output, signal,
            list) over ``payload_threshold_bytes``, so payloads may reach
            ``payload_max_bytes``; None: payloads keep DynamoDB-sized limits
            (docs/definitions.md, "Payload sizes").
        payload_prefix: the start of every key Whimbrel writes in that bucket.
        payload_threshold_bytes: bytes of JSON over which a payload goes to the bucket.
        payload_max_bytes: the largest payload accepted with a bucket.
    """

    def __init__(
        self,
        endpoint_url: str | None = None,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        region: str | None = None,
        clock: Clock | None = None,
        *,
        launchers: Mapping[str, Launcher] | None = None,
        max_workers: int = 16,
        executor: Executor | None = None,
        actor: str = "client",
        retention_days: float | None = DEFAULT_RETENTION_DAYS,
        metrics: EngineMetrics | None = None,
        boto3_session: boto3.session.Session | None = None,
        botocore_config: Config | None = None,
        transport: str | Transport | None = None,
        payload_bucket: str | None = None,
        payload_prefix: str = DEFAULT_PAYLOAD_PREFIX,
        payload_threshold_bytes: int = DEFAULT_PAYLOAD_THRESHOLD_BYTES,
        payload_max_bytes: int = DEFAULT_PAYLOAD_MAX_BYTES,
    ) -> None:
        settings = Settings.from_env()
        # A caller's session says its region (it read AWS_REGION itself if not given).
        region = region or (boto3_session.region_name if boto3_session else settings.region)
        if retention_days is not None:
            retention_days = parse_retention_days(retention_days, "retention_days")
        self.clock: Clock = clock or time.time
        self.store = Store(table_prefix=table_prefix, endpoint_url=endpoint_url, region=region,
                           boto3_session=boto3_session, botocore_config=botocore_config,
                           transport=transport or settings.transport,
                           payload_bucket=payload_bucket, payload_prefix=payload_prefix,
                           payload_threshold_bytes=payload_threshold_bytes,
                           payload_max_bytes=payload_max_bytes)
        self.executor: Executor = executor or ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="whimbrel-activity")
        self._max_workers = max_workers
        # What this client is a worker for (docs/contract.md, "Who runs code"): the
        # workflows it registers or starts, the modules of run_worker.
        self._python = PythonLauncher(self.executor, self._run_python, WorkerScope(),
                                      capacity=None if executor else max_workers)
        self._background = self._foreground = None
        self._stop_worker = threading.Event()
        self._serve_lock = threading.Lock()
        self._decided: set[str] = set()
        all_launchers: dict[str, Launcher] = {
            "python": self._python,
            "command": CommandLauncher(self.executor, self._run_command),
        }
        all_launchers.update(launchers or {})
        self.engine = Engine(self.store, clock=self.clock, launchers=all_launchers, actor=actor,
                             retention_days=retention_days, metrics=metrics)
        self.engine.starting_hooks.append(self._serve)  # a worker for what it starts

    @classmethod
    def from_env(cls, **overrides: Any) -> Whimbrel:
        """Configure from ``WHIMBREL_ENDPOINT_URL`` (unset: real AWS),
        ``WHIMBREL_TABLE_PREFIX`` (default ``whimbrel_``), ``WHIMBREL_RETENTION_DAYS``
        (a number, or ``none`` to keep ended runs forever), ``WHIMBREL_METRICS`` (``emf``:
        engine metrics as EMF lines on stdout), ``WHIMBREL_PAYLOAD_BUCKET`` /
        ``WHIMBREL_PAYLOAD_PREFIX`` / ``WHIMBREL_PAYLOAD_THRESHOLD_BYTES`` /
        ``WHIMBREL_PAYLOAD_MAX_BYTES`` (large payloads in S3) and the AWS region variables.

        Raises:
            InvalidInput: a malformed setting.
        """
        settings = Settings.from_env()
        kwargs: dict[str, Any] = {
            "endpoint_url": settings.endpoint_url,
            "table_prefix": settings.table_prefix,
            "region": settings.region,
            "retention_days": settings.retention_days,
            "payload_bucket": settings.payload_bucket,
            "payload_prefix": settings.payload_prefix,
            "payload_threshold_bytes": settings.payload_threshold_bytes,
            "payload_max_bytes": settings.payload_max_bytes,
        }
        kwargs.update(overrides)
        if settings.metrics == "emf" and "metrics" not in overrides:
            kwargs["metrics"] = EmfMetrics(str(kwargs["table_prefix"]))
        return cls(**kwargs)

    #: Builds what delivers the twin's stream records to the stream handlers
    #: (``(client, twin) -> runner`` with ``drain() -> int``). Set by the layer that has
    #: the handlers, ``whimbrel.local.memory``, when it is imported (``import whimbrel``
    #: does): the facade must not import upwards.
    stream_runner: Callable[..., Any] | None = None
    #: The in-memory twin this client runs on (:meth:`in_memory`), else None.
    twin: MemoryDynamoDB | None = None

    @classmethod
    def in_memory(cls, clock: Clock | None = None, **options: Any) -> Whimbrel:
        """The whole facade over an in-memory twin of DynamoDB
        (:class:`whimbrel.store.memory.MemoryDynamoDB`), its tables created: the store's
        own conditional writes run on it unchanged, so runs, waits, signals, approvals,
        workers, schedules, pools and code workflows behave as on DynamoDB, in
        milliseconds and with no Java. Rows for a stream consumer (raw
        ``workflow_request`` and ``activity_event`` rows) are delivered to the engine's
        stream handlers when you call :meth:`drain`. With ``clock`` (e.g.
        ``whimbrel.testing.StepClock``) timers, retries, deadlines, stream record times
        and TTL follow it. ``options`` are the constructor's (``table_prefix``,
        ``launchers``, ``retention_days``, ...); the twin needs no endpoint.

        Raises:
            TypeError: an option the constructor does not take, or one about AWS access
                (``endpoint_url``, ``transport``, ``boto3_session``, ...).
        """
        refused = {"endpoint_url", "transport", "boto3_session", "botocore_config",
                   "payload_bucket"} & set(options)
        if refused:
            raise TypeError(f"in_memory() takes no {', '.join(sorted(refused))}: the twin "
                            "is not reached over the network")
        twin = MemoryDynamoDB(clock=clock or time.time,
                              region=options.pop("region", None) or "us-east-1")
        client = cls(clock=clock, transport=twin.connect(), **options)
        client.twin = twin
        client.create_tables()
        return client

    def drain(self) -> int:
        """Deliver what the in-memory twin's streams hold (and what those deliveries
        write) to the engine's stream handlers, as the deployed event source mappings
        would, until every stream is read to its end; with a
        :class:`~whimbrel.client.queued.QueuedExecutor`, run the python activities it
        holds too, until neither has anything left. Returns the handler invocations and
        activities run. Only for a client made by :meth:`in_memory`.

        Raises:
            WhimbrelError: not an in-memory client, or no stream runner is loaded.
        """
        twin = self.twin
        if twin is None:
            raise WhimbrelError("drain() is for a client made by Whimbrel.in_memory(); "
                                "on DynamoDB the stream consumers deliver records")
        runner = self.__dict__.get("_stream_runner")
        if runner is None:
            if Whimbrel.stream_runner is None:
                raise WhimbrelError("no stream runner: import whimbrel (or "
                                    "whimbrel.local.memory) before drain()")
            runner = self.__dict__["_stream_runner"] = Whimbrel.stream_runner(self, twin)
        done = 0
        while True:  # an activity's end may write a record, a delivery launch an activity
            ran = (self.executor.run_pending() if isinstance(self.executor, QueuedExecutor)
                   else 0)
            delivered: int = runner.drain()
            done += ran + delivered
            if not ran and not delivered:
                return done

    @property
    def table_prefix(self) -> str:
        return self.store.table_prefix

    @property
    def endpoint_url(self) -> str | None:
        return self.store.endpoint_url

    @property
    def meter(self) -> CapacityMeter:
        """Read/write units this client consumed, counted by AWS's billing rules."""
        return self.store.meter

    def create_tables(self) -> list[str]:
        """Create any missing table (idempotent); returns the names created."""
        return self.store.create_tables()

    def register_workflow(self, definition: WorkflowDefinition | CodeWorkflow[Any]) -> int:
        """Validate and store ``definition`` — a DAG, or a function decorated with
        ``@workflow`` (this process then makes its runs' decisions); returns its version
        (unchanged if equal to the latest).

        This client is a worker for its python activities from now on, while it lives
        (docs/contract.md, "Who runs code").

        Raises:
            InvalidDefinition: listing every problem.
        """
        if isinstance(definition, CodeWorkflow):
            self.engine.feature(CodeRuns).add(definition)
            # Its steps' code is served as its decisions here ask for it (ports.serve_here);
            # their retries and hand-backs are claimed in the background.
            self._serve_in_background()
            definition = definition.definition()
        version = self.engine.definitions.register(definition)
        self._serve(definition)
        return version

    def get_definition(self, name: str, version: int | None = None) -> WorkflowDefinition:
        return self.engine.definitions.definition(name, version)[1]

    def list_definitions(self, name: str | None = None) -> list[DefinitionVersion]:
        """Registered definition versions (of ``name``, or of every workflow), by name
        and newest version first. Without ``name`` it reads the whole definition table:
        an operator listing, never on a run's path.

        Raises:
            InvalidInput: ``name`` is not a workflow name.
        """
        return query.list_definitions(self.store, name)

    def as_actor(self, actor: str) -> Whimbrel:
        """A client sharing this one's store, clock, launchers and activity threads, whose
        moves name ``actor`` in histories (the local runtime's stand-in Lambdas use it).
        Close only the original."""
        other = object.__new__(Whimbrel)
        other.__dict__.update(self.__dict__)
        other.engine = Engine(self.store, clock=self.clock,
                              launchers=self.engine.launchers, actor=actor,
                              retention_days=self.engine.retention_days,
                              reconcile_grace_seconds=self.engine.reconcile_grace_seconds,
                              metrics=self.engine.metrics)
        other.engine.starting_hooks.append(other._serve)
        return other

    @property
    def intake(self) -> Intake:
        """The Simple API's stream-record adapter over this client's engine (what the
        Lambda handlers call)."""
        return Intake(self.engine)

    @property
    def worker_scope(self) -> WorkerScope:
        """What python code this client runs (it is a *worker* for): see
        docs/contract.md, "Who runs code"."""
        return self._python.scope

    def close(self, wait_seconds: float = CLOSE_WAIT_SECONDS) -> None:
        """Release the client. It is no longer a worker: what it advances from now on is
        left claimable for one; python attempts it launched but never started are handed
        back (a next attempt, claimable); those running get up to ``wait_seconds`` to
        finish (and still record their end after that)."""
        self._close_workers(wait_seconds)
        self.executor.shutdown(wait=False, cancel_futures=False)
        self.engine.close()

    def __enter__(self) -> Whimbrel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run_python(self, request: LaunchRequest, func: Callable[..., Any]) -> None:
        with run_activity(self.engine, request.activity_exec_id) as act:
            result = func(act)
            if result is not None:
                act.output = result

    def _run_command(self, request: LaunchRequest, argv: list[str]) -> int:
        return run_command(self.engine, request.activity_exec_id, argv,
                           env=request.environment())
