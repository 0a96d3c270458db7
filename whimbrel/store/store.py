"""Whimbrel's DynamoDB store: the engine's :class:`~whimbrel.engine.ports.StorePort`.

Every table goes through one transport (:mod:`whimbrel.store.transport`: the lean
client, or botocore behind the same seam) and one codec (:mod:`whimbrel.store.codec`);
every request is metered and every write runs the write hooks (fault injection); the
three are held by one :class:`~whimbrel.store.plumbing.Tables` object.

The tables are parts by concern, each a plain class holding that one ``Tables``:

* the core parts, runs and edges (:mod:`~whimbrel.store.runs`) and attempts, timers and
  claims (:mod:`~whimbrel.store.attempts`), whose methods are ``Store``'s own: the
  engine's core ``StorePort``;
* ``store.cold`` (definitions, requests, events, rejections), the core's too;
* one part per feature with tables of its own, each a module of ``whimbrel/store/parts/``
  implementing that feature's port, found there (:func:`whimbrel.store.part.parts`) and
  reached one way, by the port: ``store.part(PoolPort)``. The parts there before that
  door (``signals``, ``markers``, ``schedules``, ``leases``, ``pools``) are also typed
  attributes, for the client and the tests; a new part needs no line here.

The engine speaks intent; index keys are derived in :func:`whimbrel.store.runs.index_changes`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from whimbrel.contract.errors import StoreError
from whimbrel.contract.ids import END_NODE
from whimbrel.contract.limits import DEFAULT_PAYLOAD_MAX_BYTES, DEFAULT_PAYLOAD_THRESHOLD_BYTES
from whimbrel.contract.payloads import PayloadLimits
from whimbrel.settings import DEFAULT_PAYLOAD_PREFIX, DEFAULT_TABLE_PREFIX
from whimbrel.store import specs
from whimbrel.store.attempts import Attempts
from whimbrel.store.blobs import OffloadingTransport, PayloadBlobs
from whimbrel.store.cold import Cold
from whimbrel.store.errors import translate
from whimbrel.store.keys import index_changes
from whimbrel.store.meter import CapacityMeter
from whimbrel.store.part import Part, parts
from whimbrel.store.parts.leases import Leases
from whimbrel.store.parts.notifications import Markers
from whimbrel.store.parts.pools import Pools
from whimbrel.store.parts.schedules import Schedules
from whimbrel.store.parts.signals import Signals
from whimbrel.store.plumbing import Tables
from whimbrel.store.runs import Runs, WorkflowKeyPage
from whimbrel.store.transport import (
    BotocoreTransport,
    Transport,
    botocore_client,
    s3_client,
    transport_for,
)

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config

__all__ = ["END_NODE", "Store", "WorkflowKeyPage", "WriteHook", "index_changes"]

P = TypeVar("P")


class WriteHook(Protocol):
    """Called around every write: ``phase`` is ``"before"`` or ``"after"``.

    The reliability tests use it to crash a process between any two writes.
    """

    def __call__(self, phase: str, operation: str, table: str) -> None: ...


class Store(Runs, Attempts):
    """Tables of one prefix at one endpoint. Safe to share between threads.

    Its own methods are the core parts' (runs, edges, attempts, timers, claims), and
    ``cold`` the core's other tables; a feature's tables are its part, reached by its
    port (``store.part(PoolPort)``), all over one ``Tables``.

    Args:
        endpoint_url: DynamoDB endpoint; None: what botocore resolves (AWS, or
            ``AWS_ENDPOINT_URL_DYNAMODB``).
        region: None: the session's region, else us-east-1.
        boto3_session: the session whose credentials, profile and region to use.
        botocore_config: a ``botocore.config.Config`` (proxies, CA bundle, retries,
            timeouts, FIPS/dual-stack endpoints); Whimbrel adds only what it leaves unset.
        transport: ``auto`` (lean unless it cannot honour the config), ``lean`` or
            ``botocore``; or a :class:`~whimbrel.store.transport.Transport` object to
            send every request to instead (the in-memory twin,
            :class:`whimbrel.store.memory.MemoryDynamoDB`): then no botocore client is
            made and the endpoint, region, session and config arguments are unused.
        payload_bucket: the S3 bucket that keeps payloads over
            ``payload_threshold_bytes`` (None: none; payloads keep today's limits).
        payload_prefix: the start of every key written there.
        payload_threshold_bytes: a payload larger than this (bytes of JSON) goes to S3.
        payload_max_bytes: the largest payload accepted with a bucket.
    """

    def __init__(
        self,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        endpoint_url: str | None = None,
        region: str | None = None,
        meter: CapacityMeter | None = None,
        boto3_session: boto3.session.Session | None = None,
        botocore_config: Config | None = None,
        transport: str | Transport = "auto",
        payload_bucket: str | None = None,
        payload_prefix: str = DEFAULT_PAYLOAD_PREFIX,
        payload_threshold_bytes: int = DEFAULT_PAYLOAD_THRESHOLD_BYTES,
        payload_max_bytes: int = DEFAULT_PAYLOAD_MAX_BYTES,
    ) -> None:
        self.table_prefix = table_prefix
        self.endpoint_url = endpoint_url
        self.meter = meter or CapacityMeter()
        self.claim_shards = tuple(str(i) for i in range(specs.CLAIM_SHARDS))
        self.priority_claim_shards = tuple(f"p{i}"
                                           for i in range(specs.PRIORITY_CLAIM_SHARDS))
        # The same shards again for python work left for a worker (store/keys.py).
        self.worker_claim_shards = tuple(f"w{k}" for k in self.claim_shards)
        self.worker_priority_claim_shards = tuple(f"w{k}" for k in self.priority_claim_shards)
        self.write_hooks: list[WriteHook] = []
        client: Transport
        self._admin: Transport
        if isinstance(transport, str):
            self.botocore: Any = botocore_client(endpoint_url=endpoint_url, region=region,
                                                 boto3_session=boto3_session,
                                                 botocore_config=botocore_config)
            self.region = str(self.botocore.meta.region_name)
            client = transport_for(self.botocore, kind=transport, boto3_session=boto3_session)
            #: Table management (rare, not metered): always botocore (waiters, pagination).
            self._admin = BotocoreTransport(self.botocore)
        else:  # a transport object (the in-memory twin): it answers everything
            self.botocore = None
            self.region = transport.region
            client = self._admin = transport
        client.observers.append(lambda op, _params, resp: self.meter.record(op, resp))
        client.retry_observers.append(self.meter.record_retry)
        region_name = self.region
        #: Large payloads (store/blobs.py): written with a bucket, read in any case (a
        #: raw row may reference an object of its own).
        self.blobs = PayloadBlobs(
            bucket=payload_bucket, prefix=payload_prefix,
            threshold=payload_threshold_bytes, max_bytes=payload_max_bytes,
            client=lambda: s3_client(region=region_name, boto3_session=boto3_session,
                                     botocore_config=botocore_config),
            meter=self.meter, hooks=self.write_hooks)  # type: ignore[arg-type]
        if payload_bucket is not None:
            client = OffloadingTransport(client, self.blobs, {  # type: ignore[assignment]
                spec.table_name(table_prefix): spec.logical_name for spec in specs.TABLES})
        #: The plumbing every part holds: transport, write hooks, request shapes.
        self.tables = Tables(client, table_prefix, self._write)
        Runs.__init__(self, self.tables)
        Attempts.__init__(self, self.tables)
        self.cold = Cold(self.tables)
        #: One instance of every part (whimbrel/store/parts/), by the port it implements.
        self._parts: dict[str, Part] = {cls.PORT: cls(self.tables, self) for cls in parts()}
        self.signals = cast(Signals, self._parts[Signals.PORT])
        self.markers = cast(Markers, self._parts[Markers.PORT])
        self.schedules = cast(Schedules, self._parts[Schedules.PORT])
        self.leases = cast(Leases, self._parts[Leases.PORT])
        self.pools = cast(Pools, self._parts[Pools.PORT])

    def part(self, port: Callable[..., P]) -> P:
        """This store's part implementing the engine's protocol ``port`` (a part in
        ``whimbrel/store/parts/`` whose ``PORT`` is the protocol's name): the one door to a
        feature's tables. The port's module checks, for mypy, that the part implements it.

        ``port`` is typed as a callable returning the port, not ``type[P]``: mypy refuses
        a protocol class where ``type[P]`` is asked (``type-abstract``).

        Raises:
            LookupError: no part implements ``port``.
        """
        name = getattr(port, "__name__", repr(port))
        found = self._parts.get(name)
        if found is None:
            raise LookupError(f"no store part implements {name}; the parts implement "
                              f"{sorted(self._parts)}")
        return cast(P, found)

    @property
    def payload_limits(self) -> PayloadLimits:
        """How large a payload may be here (with or without a bucket)."""
        return self.blobs.limits

    def payload_text(self, text: str | None, field: str = "payload") -> str | None:
        """A payload's JSON text whole: ``text`` itself, or the object its reference
        names (``s3://bucket/key``; read once per process).

        Raises:
            PayloadMissing: the object is missing or cannot be read.
        """
        return self.blobs.resolve(text, field)

    @property
    def transport(self) -> Transport:
        """The transport every request of this store goes through."""
        return self.tables.client  # type: ignore[return-value]

    # -- plumbing --------------------------------------------------------------------

    def _write(self, operation: str, table: str, fn: Callable[[], Any]) -> Any:
        for hook in self.write_hooks:
            hook("before", operation, table)
        result = fn()
        for hook in self.write_hooks:
            hook("after", operation, table)
        return result

    def table_name(self, logical: str) -> str:
        return specs.table_spec(logical).table_name(self.table_prefix)

    # -- tables ----------------------------------------------------------------------

    def create_tables(self, *, wait: bool = True) -> list[str]:
        """Create every missing table, with TTL on (idempotent). Returns the names created."""
        client = self._admin
        created: list[str] = []
        existing: set[str] = set()
        params: dict[str, Any] = {}
        while True:
            page = client.call("ListTables", params)
            existing.update(page.get("TableNames", []))
            if not page.get("LastEvaluatedTableName"):
                break
            params = {"ExclusiveStartTableName": page["LastEvaluatedTableName"]}
        for spec in specs.TABLES:
            name = spec.table_name(self.table_prefix)
            if name in existing:
                continue
            try:
                client.call("CreateTable", specs.create_table_request(spec, self.table_prefix))
            except StoreError as exc:
                if exc.aws_code == "ResourceInUseException":
                    continue  # created concurrently by someone else: fine
                raise
            created.append(name)
        if wait and self.botocore is not None:  # a transport object's tables are ready
            waiter = self.botocore.get_waiter("table_exists")
            for name in created:
                try:
                    waiter.wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
                except Exception as exc:  # WaiterError: the one seam translates it
                    raise translate("CreateTable", None, f"{name}: {exc}") from exc
        for spec in specs.TABLES:
            if spec.ttl_attribute and spec.table_name(self.table_prefix) in created:
                client.call("UpdateTimeToLive", {
                    "TableName": spec.table_name(self.table_prefix),
                    "TimeToLiveSpecification": {"Enabled": True,
                                                "AttributeName": spec.ttl_attribute}})
        return created

    def delete_tables(self) -> None:
        client = self._admin
        for spec in specs.TABLES:
            try:
                client.call("DeleteTable", {"TableName": spec.table_name(self.table_prefix)})
            except StoreError as exc:
                if exc.aws_code != "ResourceNotFoundException":
                    raise


def now_epoch() -> float:
    return time.time()
