"""The in-memory DynamoDB behind the store's transport seam (:class:`MemoryDynamoDB`)
and its streams (:class:`MemoryStreams`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from whimbrel.store.errors import RetryPolicy, translate
from whimbrel.store.lean import RequestObserver, RetryObserver
from whimbrel.store.memory.reads import READS
from whimbrel.store.memory.tables import Index, Table
from whimbrel.store.memory.values import DynamoError, invalid
from whimbrel.store.memory.writes import WRITES

__all__ = ["MemoryConnection", "MemoryDynamoDB", "MemoryStreams"]


def _not_found(name: object) -> DynamoError:
    return DynamoError("ResourceNotFoundException",
                       f"Requested resource not found: Table: {name} not found")


class MemoryDynamoDB:
    """A DynamoDB in this process, spoken to as the store's ``Transport``: DynamoDB JSON
    in and out, a lost condition raised as ``ConditionLost`` (with the item as it is now
    when asked for with ``ReturnValuesOnConditionCheckFailure``), every other error as
    ``StoreError`` with DynamoDB's code, through the same translator as the real
    transports. One lock: every request is atomic, as each DynamoDB request is per item.

    Args:
        clock: epoch seconds for stream records' creation time and for TTL expiry
            (:meth:`expire`); tests pass their ``StepClock``.
        region: what stream records and ARNs say.
    """

    name = "memory"
    url = "memory://whimbrel"

    def __init__(self, *, clock: Callable[[], float] = time.time,
                 region: str = "us-east-1") -> None:
        self.clock = clock
        self.region = region
        self.retry = RetryPolicy(max_attempts=1)
        self.observers: list[RequestObserver] = []
        self.retry_observers: list[RetryObserver] = []
        self.tables: dict[str, Table] = {}
        self.lock = threading.RLock()
        self.streams = MemoryStreams(self)
        #: Requests answered, by operation (for tests and benchmarks).
        self.calls: dict[str, int] = {}

    def table(self, name: object) -> Table:
        if not isinstance(name, str) or name not in self.tables:
            raise _not_found(name)
        return self.tables[name]

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Answer one request as DynamoDB would.

        Raises:
            ConditionLost: a condition was false.
            StoreError: any other error DynamoDB would answer with.
        """
        handler = _OPERATIONS.get(operation)
        try:
            if handler is None:
                raise DynamoError("UnknownOperationException",
                                  f"the in-memory twin does not answer {operation}")
            with self.lock:
                self.calls[operation] = self.calls.get(operation, 0) + 1
                response = handler(self, params)
        except DynamoError as exc:
            for observer in self.observers:
                observer(operation, params, None)
            raise translate(operation, exc.code, exc.message, status=400,
                            item=exc.item) from None
        for observer in self.observers:
            observer(operation, params, response)
        return response

    def connect(self) -> MemoryConnection:
        """A transport of its own to this twin, for one more client: each store puts its
        meter on its transport's observers, so clients sharing the twin (two processes
        in a test) must not share one transport."""
        return MemoryConnection(self)

    def expire(self, now: float | None = None) -> int:
        """Delete every item whose TTL attribute is a time before ``now`` (default: the
        clock), as DynamoDB's TTL process does some time after it passes (a ``REMOVE``
        stream record by the service). Returns how many went."""
        now = self.clock() if now is None else now
        gone = 0
        with self.lock:
            for table in self.tables.values():
                ttl = table.ttl_attribute
                if ttl is None:
                    continue
                expired = [(key, item) for part in table.items.values()
                           for key, item in part.items()
                           if "N" in item.get(ttl, {}) and Decimal(item[ttl]["N"]) < Decimal(
                               str(now))]
                for _, item in expired:
                    table.write(table.item_key_id(item), None, now, by_ttl=True)
                    gone += 1
        return gone


class MemoryConnection:
    """One client's transport to a shared :class:`MemoryDynamoDB` (its own observers)."""

    name = MemoryDynamoDB.name
    url = MemoryDynamoDB.url

    def __init__(self, db: MemoryDynamoDB) -> None:
        self.db = db
        self.region = db.region
        self.retry = db.retry
        self.observers: list[RequestObserver] = []
        self.retry_observers: list[RetryObserver] = []

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """As :meth:`MemoryDynamoDB.call`, told to this connection's observers."""
        try:
            response = self.db.call(operation, params)
        except Exception:
            for observer in self.observers:
                observer(operation, params, None)
            raise
        for observer in self.observers:
            observer(operation, params, response)
        return response


# -- table management ----------------------------------------------------------------------

def create_table(db: MemoryDynamoDB, params: Mapping[str, Any]) -> dict[str, Any]:
    name = params.get("TableName")
    if not isinstance(name, str) or not 3 <= len(name) <= 255:
        raise invalid("TableName must be at least 3 characters long and at most 255")
    if name in db.tables:
        raise DynamoError("ResourceInUseException", f"Table already exists: {name}")
    types = {d["AttributeName"]: d["AttributeType"]
             for d in params.get("AttributeDefinitions") or []}
    schema = {k["KeyType"]: k["AttributeName"] for k in params.get("KeySchema") or []}
    if "HASH" not in schema:
        raise invalid("No Hash Key specified in schema.  All Dynamo DB tables must have "
                      "exactly one hash key")
    indexes: dict[str, Index] = {}
    for gsi in [*(params.get("GlobalSecondaryIndexes") or []),
                *(params.get("LocalSecondaryIndexes") or [])]:
        keys = {k["KeyType"]: k["AttributeName"] for k in gsi["KeySchema"]}
        projection = gsi.get("Projection") or {}
        indexes[gsi["IndexName"]] = Index(
            gsi["IndexName"], keys["HASH"], keys.get("RANGE"),
            projection.get("ProjectionType", "ALL"),
            tuple(projection.get("NonKeyAttributes") or ()))
    used = {*schema.values(), *(n for i in indexes.values()
                               for n in (i.hash_key, i.range_key) if n)}
    if used != set(types):
        raise invalid("One or more parameter values were invalid: Some index key attributes "
                      "are not defined in AttributeDefinitions. Keys: "
                      f"{sorted(used - set(types))}, AttributeDefinitions: {sorted(types)}")
    stream = params.get("StreamSpecification") or {}
    table = Table(name, schema["HASH"], schema.get("RANGE"), types, indexes,
                  stream.get("StreamViewType") if stream.get("StreamEnabled") else None,
                  db.region, db.clock())
    db.tables[name] = table
    return {"TableDescription": table.describe()}


def delete_table(db: MemoryDynamoDB, params: Mapping[str, Any]) -> dict[str, Any]:
    table = db.table(params.get("TableName"))
    del db.tables[table.name]
    return {"TableDescription": {**table.describe(), "TableStatus": "DELETING"}}


def describe_table(db: MemoryDynamoDB, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"Table": db.table(params.get("TableName")).describe()}


def list_tables(db: MemoryDynamoDB, params: Mapping[str, Any]) -> dict[str, Any]:
    names = sorted(db.tables)
    start = params.get("ExclusiveStartTableName")
    if start:
        names = [n for n in names if n > start]
    limit = int(params.get("Limit") or 100)
    response: dict[str, Any] = {"TableNames": names[:limit]}
    if len(names) > limit:
        response["LastEvaluatedTableName"] = names[limit - 1]
    return response


def update_time_to_live(db: MemoryDynamoDB, params: Mapping[str, Any]) -> dict[str, Any]:
    table = db.table(params.get("TableName"))
    spec = params.get("TimeToLiveSpecification") or {}
    if spec.get("Enabled") and table.ttl_attribute is not None:
        raise invalid("TimeToLive is already enabled")
    table.ttl_attribute = spec.get("AttributeName") if spec.get("Enabled") else None
    return {"TimeToLiveSpecification": dict(spec)}


def describe_time_to_live(db: MemoryDynamoDB, params: Mapping[str, Any]) -> dict[str, Any]:
    table = db.table(params.get("TableName"))
    if table.ttl_attribute is None:
        return {"TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}}
    return {"TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED",
                                      "AttributeName": table.ttl_attribute}}


_OPERATIONS: dict[str, Callable[[MemoryDynamoDB, Mapping[str, Any]], dict[str, Any]]] = {
    **READS, **WRITES, "CreateTable": create_table, "DeleteTable": delete_table,
    "DescribeTable": describe_table, "ListTables": list_tables,
    "UpdateTimeToLive": update_time_to_live, "DescribeTimeToLive": describe_time_to_live,
}


# -- streams ------------------------------------------------------------------------------

SHARD_ID = "shardId-00000000000000000001-memory"


def _stream_error(code: str, message: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


class MemoryStreams:
    """The twin's streams through the ``dynamodbstreams`` client methods the local
    runtime's :class:`~whimbrel.local.streams.StreamPump` calls (``list_streams``,
    ``describe_stream``, ``get_shard_iterator``, ``get_records``), answering as boto3
    does (``ClientError`` on failure). One shard per stream that never closes; records
    are kept for the twin's lifetime (no 24-hour trim)."""

    def __init__(self, db: MemoryDynamoDB) -> None:
        self._db = db

    def _table(self, arn: str, operation: str) -> Table:
        for table in self._db.tables.values():
            if table.stream_arn == arn:
                return table
        raise _stream_error("ResourceNotFoundException",
                            f"Requested resource not found: Stream: {arn} not found", operation)

    def list_streams(self, TableName: str | None = None, **_: Any) -> dict[str, Any]:
        with self._db.lock:
            return {"Streams": [
                {"StreamArn": t.stream_arn, "TableName": t.name,
                 "StreamLabel": str(t.stream_arn).rpartition("/")[2]}
                for t in self._db.tables.values()
                if t.stream_arn and TableName in (None, t.name)]}

    def describe_stream(self, StreamArn: str, **_: Any) -> dict[str, Any]:
        with self._db.lock:
            table = self._table(StreamArn, "DescribeStream")
            return {"StreamDescription": {
                "StreamArn": StreamArn, "StreamStatus": "ENABLED",
                "StreamViewType": table.stream_view, "TableName": table.name,
                "StreamLabel": StreamArn.rpartition("/")[2],
                "KeySchema": table.describe()["KeySchema"],
                "Shards": [{"ShardId": SHARD_ID, "SequenceNumberRange": {
                    "StartingSequenceNumber": f"{1:021d}"}}]}}

    def get_shard_iterator(self, StreamArn: str, ShardId: str, ShardIteratorType: str,
                           SequenceNumber: str | None = None, **_: Any) -> dict[str, Any]:
        with self._db.lock:
            table = self._table(StreamArn, "GetShardIterator")
            if ShardId != SHARD_ID:
                raise _stream_error("ResourceNotFoundException",
                                    f"Shard {ShardId} not found", "GetShardIterator")
            if ShardIteratorType == "TRIM_HORIZON":
                position = 0
            elif ShardIteratorType == "LATEST":
                position = len(table.stream)
            elif ShardIteratorType in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER") \
                    and SequenceNumber is not None:
                position = int(SequenceNumber) - (ShardIteratorType == "AT_SEQUENCE_NUMBER")
            else:
                raise _stream_error("ValidationException",
                                    f"Invalid ShardIteratorType {ShardIteratorType}",
                                    "GetShardIterator")
            return {"ShardIterator": f"{StreamArn}|{position}"}

    def get_records(self, ShardIterator: str, Limit: int = 1000, **_: Any) -> dict[str, Any]:
        arn, _sep, position_text = ShardIterator.rpartition("|")
        with self._db.lock:
            table = self._table(arn, "GetRecords")
            position = int(position_text)
            records = table.stream[position:position + Limit]
            from whimbrel.store.memory.values import copy_value
            return {"Records": [copy_value(r) for r in records],
                    "NextShardIterator": f"{arn}|{position + len(records)}"}

    def pending(self) -> int:
        """Records written to every stream in all (for tests: has anything changed?)."""
        with self._db.lock:
            return sum(len(t.stream) for t in self._db.tables.values())
