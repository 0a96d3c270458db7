"""``whimbrel dev``: the whole serverless system on one machine.

:class:`LocalRuntime` starts DynamoDB Local (unless given an endpoint), creates the
tables, and runs one :class:`~whimbrel.local.streams.StreamPump` per entry of
:data:`~whimbrel.store.consumers.ENGINE_CONSUMERS` — feeding the *same* handlers that are
deployed (``lambdas/``) with Lambda-shaped events from the real streams — plus the
heartbeat handler on a schedule. ``python`` launcher activities run in this process.
Given an events file (or a publisher), the ``notify`` consumers run too and append
every event to it (docs/events.md).

    with LocalRuntime() as rt:
        rt.client.register_workflow(defn)
        request_id = rt.client.request_workflow("diamond", {"x": 1})
        rt.client.wait(workflow_exec_id_for(request_id))
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import boto3

from whimbrel.client.whimbrel import Whimbrel
from whimbrel.contract.errors import WhimbrelError
from whimbrel.engine import SOURCE_DEAD_LETTER, Clock, Engine, Launcher, record_rejection
from whimbrel.local.delivery import DeliveryPolicy
from whimbrel.local.devlease import DevLease
from whimbrel.local.dynamodb_local import (
    DynamoDBLocal,
    find_dynamodb_local,
    install_dynamodb_local,
)
from whimbrel.local.streams import StreamPump
from whimbrel.observe.publishers import JsonLinesPublisher, Publisher
from whimbrel.store import specs
from whimbrel.store.consumers import (
    ENGINE_CONSUMERS,
    HEARTBEAT_HANDLER,
    HEARTBEAT_RATE_SECONDS_LOCAL,
    NOTIFY_CONSUMERS,
    PAYLOAD_CONSUMERS,
    StreamConsumerSpec,
)
from whimbrel.store.migrate import migrate_index_keys

__all__ = ["DEV_PORT", "LambdaContext", "LocalRuntime"]

#: Where ``whimbrel dev`` serves DynamoDB Local unless told otherwise: DynamoDB Local's
#: own default, so the ``export`` lines printed yesterday still work today.
DEV_PORT = 8000

log = logging.getLogger("whimbrel.local")

Handler = Callable[[dict[str, Any], Any], Any]
#: Builds the delivery policy of one stream consumer, None for the default (tests only;
#: see ``LocalRuntime(delivery=...)``).
DeliveryFactory = Callable[[StreamConsumerSpec], DeliveryPolicy | None]


@dataclass
class LambdaContext:
    """The parts of Lambda's context object the handlers (and Powertools) read, plus the
    client the handlers must use (``whimbrel_client``) and where the notify handler
    publishes (``whimbrel_publisher``; None: as configured by the environment)."""

    function_name: str
    whimbrel_client: Whimbrel
    whimbrel_publisher: Publisher | None = None
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    invoked_function_arn: str = ""
    timeout_seconds: float = 60.0
    _started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if not self.invoked_function_arn:
            self.invoked_function_arn = (
                f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}")

    def get_remaining_time_in_millis(self) -> int:
        left = self.timeout_seconds - (time.monotonic() - self._started)
        return max(0, int(left * 1000))


def dead_letter(engine: Engine, records: list[dict[str, Any]], reason: str,
                error_type: str) -> None:
    """Record each record given up on as a ``dead_letter`` rejection whose
    ``error_type`` names the handler's exception (see :data:`DeadLetter`)."""
    for rec in records:
        log.error("dead-lettered %s: %s", rec.get("eventID"), reason)
        try:
            record_rejection(engine.store, source=SOURCE_DEAD_LETTER, record=rec,
                             reason=reason, error_type=error_type, now=engine.clock())
        except WhimbrelError as exc:  # the local DLQ is best effort, like a full queue
            log.error("could not record dead letter %s: %s", rec.get("eventID"), exc)


def load_handler(dotted: str) -> Handler:
    """Import ``package.module.function`` (the spec's handler path).

    ``lambdas`` sits next to ``whimbrel`` in a checkout; when it is not importable
    (an editable install of ``whimbrel`` only), the checkout root is put on the path.
    """
    module_name, _, func = dotted.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        root = Path(__file__).resolve().parents[2]
        if exc.name != module_name.partition(".")[0] or not (root / exc.name).is_dir():
            raise
        sys.path.append(str(root))
        module = importlib.import_module(module_name)
    handler: Handler = getattr(module, func)
    return handler


class LocalRuntime:
    """DynamoDB Local + stream pumps + heartbeat schedule, as a context manager.

    Args:
        endpoint_url: use this DynamoDB (Local) instead of starting one.
        table_prefix: prefix of every table.
        heartbeat_rate_seconds: how often the heartbeat handler runs (sweep).
        clock: the engine's clock (tests may drive it).
        deliver_twice: deliver every batch twice (tests of at-least-once delivery).
        delivery: test-only seam: called once per stream consumer, returns the
            :class:`~whimbrel.local.delivery.DeliveryPolicy` that decides which
            invocations each batch becomes (e.g. ``RandomRedelivery``: records repeated,
            batches split, copies replayed later); None, or a factory returning None for
            a consumer: one invocation per batch. Excludes ``deliver_twice``. Each pump
            keeps its policy (``pumps[name].delivery``).
        poll_interval: idle pause between stream polls.
        launchers: extra launchers for the dev process (``python`` and ``command`` are
            always there).
        consumers: the event source mappings to emulate (default: the engine's, the
            notify ones when there is an events file or a publisher, and the payload
            expiry one with a ``payload_bucket``).
        lambda_log_level: level of the handlers' Powertools logger (None: unchanged).
        events_file: the notify handler appends every event here, as JSON lines.
        publisher: where the notify handler publishes instead (excludes events_file).
        exclusive: hold the ``dev`` lease while running (``whimbrel/local/devlease.py``):
            refuse to start next to another runtime on the same tables
            (``DevAlreadyRunning``), which would process every stream record twice.
            False only for a runtime that stands for the deployed stack in a
            measurement (the benchmarks), where no such lease exists. A lease held by
            a process of this host that is gone is taken over at once; one held on
            another host is waited for (``sleep``), and ``say`` tells a person so.
        sleep: how the runtime waits for another host's dev lease (tests pass their
            clock's ``advance``).
        say: where the runtime tells a person that it waits for, or took over, the dev
            lease (default: the log).

            measurement (the benchmarks), where no such lease exists.
        payload_bucket: the S3 bucket for large payloads (None: today's limits).
    """

    def __init__(
        self,
        endpoint_url: str | None = None,
        table_prefix: str = specs.DEFAULT_TABLE_PREFIX,
        heartbeat_rate_seconds: float = HEARTBEAT_RATE_SECONDS_LOCAL,
        *,
        clock: Clock | None = None,
        deliver_twice: bool = False,
        delivery: DeliveryFactory | None = None,
        poll_interval: float = 0.05,
        launchers: Mapping[str, Launcher] | None = None,
        consumers: tuple[StreamConsumerSpec, ...] | None = None,
        lambda_log_level: str | None = None,
        region: str = "us-east-1",
        events_file: str | Path | None = None,
        publisher: Publisher | None = None,
        exclusive: bool = True,
        sleep: Callable[[float], object] = time.sleep,
        say: Callable[[str], object] | None = None,

        payload_bucket: str | None = None,
    ) -> None:
        if events_file is not None:
            if publisher is not None:
                raise ValueError("give events_file or publisher, not both")
            publisher = JsonLinesPublisher(events_file, region=region)
        self.publisher = publisher
        if consumers is None:
            consumers = ENGINE_CONSUMERS
            if publisher is not None:
                consumers += NOTIFY_CONSUMERS
            if payload_bucket is not None:
                consumers += PAYLOAD_CONSUMERS
        self._endpoint_url = endpoint_url
        self.table_prefix = table_prefix
        self.heartbeat_rate_seconds = heartbeat_rate_seconds
        self.deliver_twice = deliver_twice
        self.delivery = delivery
        self.poll_interval = poll_interval
        self.consumers = consumers
        self.lambda_log_level = lambda_log_level
        self.region = region
        self._clock = clock
        self._launchers = dict(launchers or {})
        self._ddb: DynamoDBLocal | None = None
        self._stop = threading.Event()
        # One invocation at a time: the handlers share Powertools state (logger keys,
        # the metric set) per process, which real Lambda never runs concurrently.
        self._invoke_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.pumps: dict[str, StreamPump] = {}
        self.heartbeat_runs = 0
        self._client: Whimbrel | None = None
        self._lambda_client: Whimbrel | None = None
        self._engine: Engine | None = None
        self.exclusive = exclusive
        self._sleep, self._say = sleep, say

        #: The S3 bucket of large payloads (``AWS_ENDPOINT_URL_S3`` says where S3 is).
        self.payload_bucket = payload_bucket
        self._lease: DevLease | None = None
        #: Runs moved onto the write-sharded listing keys at start (an old --data-dir).
        self.migrated = 0

    # -- properties ----------------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        if self._endpoint_url is None:
            raise WhimbrelError("LocalRuntime is not started")
        return self._endpoint_url

    @property
    def client(self) -> Whimbrel:
        """A Whimbrel client on the runtime's tables; its python activities run here."""
        if self._client is None:
            raise WhimbrelError("LocalRuntime is not started")
        return self._client

    @property
    def lambda_client(self) -> Whimbrel:
        """The client the stand-in Lambdas use (actor ``lambda``, sharing ``client``'s
        store and activity threads)."""
        if self._lambda_client is None:
            raise WhimbrelError("LocalRuntime is not started")
        return self._lambda_client

    @property
    def engine(self) -> Engine:
        """The engine the handlers use (actor ``lambda``)."""
        if self._engine is None:
            raise WhimbrelError("LocalRuntime is not started")
        return self._engine

    @property
    def dev_lease(self) -> DevLease | None:
        """The ``dev`` lease this runtime holds (None: not ``exclusive``, or not started)."""
        return self._lease

    @property
    def stopped(self) -> bool:
        """True once the runtime stopped, by :meth:`stop` or on its own (another runtime
        took its dev lease over after this one stalled past it)."""
        return self._stop.is_set() or (self._lease is not None and self._lease.lost.is_set())

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Self:
        """Start DynamoDB Local (if needed), create tables, start pumps and the schedule.

        Raises:
            DynamoDBLocalError: DynamoDB Local could not start.
            StoreError: tables could not be created.
            DevAlreadyRunning: another runtime runs on these tables (``exclusive``).
        """
        try:
            if self._endpoint_url is None:
                self._ddb = DynamoDBLocal(directory=install_dynamodb_local(find_dynamodb_local()))
                self._ddb.start()
                self._endpoint_url = self._ddb.endpoint_url
            self._client = Whimbrel(endpoint_url=self._endpoint_url,
                                    table_prefix=self.table_prefix, region=self.region,
                                    clock=self._clock, launchers=self._launchers,
                                    payload_bucket=self.payload_bucket)
            self._client.create_tables()
            if self.exclusive:
                # Before any pump starts: a second runtime must not read a record.
                self._lease = DevLease(self._client.store, self._client.clock,
                                       self._endpoint_url, sleep=self._sleep, say=self._say)
                self._lease.acquire()
                # Runs of a --data-dir from before the write-sharded listing keys move
                # onto them (what `whimbrel tables migrate` does for a deployed stack;
                # idempotent, and a dev's tables are small).
                self.migrated = migrate_index_keys(self._client.store).rewritten
            self._lambda_client = self._client.as_actor("lambda")
            self._engine = self._lambda_client.engine
            # The dev runtime runs the python code it can import (from its path), and
            # claims what other processes left for a worker (docs/contract.md).
            self._client.serve_importable()
            self._start_threads()
            if self.lambda_log_level:
                # The handlers' Powertools logger (imported by now) is the stdlib logger
                # named after its service ("whimbrel"); set it without importing lambdas.
                logging.getLogger("whimbrel").setLevel(self.lambda_log_level)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_threads(self) -> None:
        ddb = boto3.client("dynamodb", endpoint_url=self._endpoint_url, region_name=self.region)
        streams = boto3.client("dynamodbstreams", endpoint_url=self._endpoint_url,
                               region_name=self.region)
        for consumer in self.consumers:
            table = consumer.table.table_name(self.table_prefix)
            arn = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
            handler = load_handler(consumer.handler)
            pump = StreamPump(
                consumer, streams=streams, stream_arn=arn,
                invoke=self._invoker(handler, consumer.function_name),
                dead_letter=self._dead_letter, stop=self._stop, region=self.region,
                poll_interval=self.poll_interval, deliver_twice=self.deliver_twice,
                delivery=self.delivery(consumer) if self.delivery is not None else None,
                may_run=self._lease.valid if self._lease is not None else None)
            self.pumps[consumer.name] = pump
            self._threads.append(pump)
        if self._lease is not None:
            self._threads.append(threading.Thread(target=self._lease.keep, args=(self._stop,),
                                                  name="whimbrel-dev-lease", daemon=True))
        if self.heartbeat_rate_seconds > 0:
            self._threads.append(threading.Thread(target=self._heartbeat_loop,
                                                  name="whimbrel-heartbeat-schedule",
                                                  daemon=True))
        for thread in self._threads:
            thread.start()

    def _invoker(self, handler: Handler, name: str) -> Callable[[dict[str, Any]], Any]:
        def invoke(event: dict[str, Any]) -> Any:
            with self._invoke_lock:
                return handler(event, LambdaContext(f"whimbrel-{name}", self.lambda_client,
                                                    self.publisher))
        return invoke

    def _dead_letter(self, records: list[dict[str, Any]], reason: str, error_type: str) -> None:
        dead_letter(self.engine, records, reason, error_type)

    def _heartbeat_loop(self) -> None:
        handler = load_handler(HEARTBEAT_HANDLER)
        while not self._stop.wait(self.heartbeat_rate_seconds):
            if self._lease is None or self._lease.valid():
                self.run_heartbeat(handler)

    def run_heartbeat(self, handler: Handler | None = None) -> Any:
        """Invoke the heartbeat handler once, as the schedule does."""
        handler = handler or load_handler(HEARTBEAT_HANDLER)
        event = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {},
                 "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        try:
            with self._invoke_lock:
                return handler(event, LambdaContext("whimbrel-heartbeat", self.lambda_client))
        except Exception as exc:  # a failed run is retried by the next tick
            log.warning("heartbeat handler failed: %s", exc)
            return None
        finally:
            self.heartbeat_runs += 1

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Block until every pump has found its stream drained at least once more.

        Raises:
            TimeoutError: still busy at the deadline.
        """
        deadline = time.monotonic() + timeout
        for pump in self.pumps.values():
            pump.idle.clear()
        for pump in self.pumps.values():
            if not pump.idle.wait(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"stream {pump.consumer.name} still busy after {timeout} s")

    def stop(self, timeout: float = 5.0) -> None:
        """Stop pumps and the schedule, close the client, stop DynamoDB Local."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads.clear()
        if self._lease is not None:
            try:
                self._lease.release()
            except WhimbrelError as exc:  # it expires by itself
                log.warning("could not give the dev lease back: %s", exc)
            self._lease = None
        if self._lambda_client is not None:
            self._lambda_client.engine.close()
        if self._client is not None:
            self._client.close()
        if self._ddb is not None:
            self._ddb.stop()
            self._ddb = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

