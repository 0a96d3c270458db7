"""Reads a table's real DynamoDB stream and feeds a handler like a Lambda event source
mapping would, with the settings of a :class:`~whimbrel.store.consumers.StreamConsumerSpec`.

Per shard (parents before children), records are turned into Lambda's event shape,
filtered with the consumer's filter patterns, and delivered in batches of at most
``batch_size``. With ``ReportBatchItemFailures`` the shard resumes from the first failed
record; a handler exception bisects the batch (``bisect_batch_on_error``). A record still
failing after ``max_retry_attempts`` retries, or older than ``max_record_age_seconds``, goes
to the dead-letter callback and the shard moves on.

Tests may pass a :class:`~whimbrel.local.delivery.DeliveryPolicy` (``delivery``) that
turns each batch into other invocations: records repeated, batches split, copies
replayed after later batches. Without one, each batch is one invocation (two with
``deliver_twice``).
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from whimbrel.local.delivery import DeliveryPolicy, record_key
from whimbrel.local.filters import matches_any
from whimbrel.store.consumers import StreamConsumerSpec

log = logging.getLogger("whimbrel.local.streams")

#: (event) -> Lambda-style response (``{"batchItemFailures": [...]}``); may raise.
Invoke = Callable[[dict[str, Any]], Any]
#: (records, reason) for records given up on.
#: ``(records, reason, error_type)``: the records given up on, why, and the type name of
#: the exception the handler raised (``BatchItemFailure`` when it reported the records
#: as failed instead, ``RecordTooOld`` past the maximum record age).
DeadLetter = Callable[[list[dict[str, Any]], str, str], None]


def _wire(value: Any) -> Any:
    """boto3's parsed DynamoDB JSON back to the wire form Lambda sends (base64 binaries)."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, Mapping):
        return {k: _wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return value


def _attribute(av: Any) -> Any:
    """One attribute value as the service sent it. botocore's DynamoDB Streams parser
    turns an empty map ``{"M": {}}`` into ``{}`` (it drops the empty member of the
    attribute-value union); every attribute value has exactly one type key, so an empty
    one can only have been an empty map."""
    if av == {}:
        return {"M": {}}
    if isinstance(av, Mapping) and isinstance(av.get("M"), Mapping):
        return {"M": {k: _attribute(v) for k, v in av["M"].items()}}
    if isinstance(av, Mapping) and isinstance(av.get("L"), list):
        return {"L": [_attribute(v) for v in av["L"]]}
    return av


def _image(image: Any) -> Any:
    if not isinstance(image, Mapping):
        return image
    return {name: _attribute(av) for name, av in image.items()}


def lambda_record(raw: Mapping[str, Any], *, stream_arn: str, region: str) -> dict[str, Any]:
    """One GetRecords record in the shape Lambda passes to a handler."""
    src = raw.get("dynamodb") or {}
    created = src.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        created_epoch: float = float(int(created.timestamp()))
    elif created is None:
        created_epoch = float(int(time.time()))
    else:
        created_epoch = float(created)
    ddb: dict[str, Any] = {"ApproximateCreationDateTime": created_epoch}
    for key in ("Keys", "NewImage", "OldImage"):
        if key in src:
            ddb[key] = _wire(_image(src[key]))
    ddb["SequenceNumber"] = str(src.get("SequenceNumber"))
    ddb["SizeBytes"] = int(src.get("SizeBytes") or 0)
    ddb["StreamViewType"] = src.get("StreamViewType", "NEW_IMAGE")
    record: dict[str, Any] = {
        "eventID": raw.get("eventID"),
        "eventName": raw.get("eventName"),
        "eventVersion": raw.get("eventVersion") or "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": region,  # DynamoDB Local says "ddblocal"; Lambda says the region
        "dynamodb": ddb,
        "eventSourceARN": stream_arn,
    }
    if raw.get("userIdentity"):
        record["userIdentity"] = raw["userIdentity"]
    return record


@dataclass
class _Shard:
    shard_id: str
    parent: str | None
    iterator: str | None = None
    checkpoint: str | None = None  # last sequence number done with
    pending: deque[dict[str, Any]] = field(default_factory=deque)
    head: str | None = None  # sequence number the retry count belongs to
    attempts: int = 0
    bisect: int | None = None  # reduced batch size after a handler error
    closed: bool = False

    def done(self) -> bool:
        return self.closed and not self.pending


@dataclass
class PumpStats:
    invocations: int = 0
    records: int = 0
    filtered_out: int = 0
    retries: int = 0
    dead_lettered: int = 0
    #: Copies of records of earlier batches (``delivery`` policy) whose invocation
    #: raised or reported them failed; their own batch handled those records.
    replay_failures: int = 0


#: How often a pump reads its stream's shard list when no shard closed meanwhile.
SHARD_LIST_SECONDS = 1.0


class StreamPump(threading.Thread):
    """One event source mapping: a thread polling one stream for one handler."""

    def __init__(self, consumer: StreamConsumerSpec, *, streams: Any, stream_arn: str,
                 invoke: Invoke, dead_letter: DeadLetter, stop: threading.Event,
                 region: str = "us-east-1", poll_interval: float = 0.05,
                 deliver_twice: bool = False, retry_backoff: float = 0.02,
                 delivery: DeliveryPolicy | None = None,
                 may_run: Callable[[], bool] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if delivery is not None and deliver_twice:
            raise ValueError("deliver_twice and a delivery policy exclude each other")
        super().__init__(name=f"whimbrel-stream-{consumer.name}", daemon=True)
        self.consumer = consumer
        self.streams = streams
        self.stream_arn = stream_arn
        self.invoke = invoke
        self.dead_letter = dead_letter
        self.stop_event = stop
        self.region = region
        self.poll_interval = poll_interval
        self.deliver_twice = deliver_twice
        self.retry_backoff = retry_backoff
        self.delivery = delivery
        #: Asked before every poll: False pauses the pump (the runtime's dev lease lapsed).
        self.may_run = may_run
        #: The clock records' age is measured by: the one their creation times come from
        #: (the in-memory twin stamps them with the engine's clock, a test's StepClock).
        self.clock = clock
        self.stats = PumpStats()
        self.idle = threading.Event()
        self._shards: dict[str, _Shard] = {}
        #: When the shard list was last read (monotonic); None: read it on the next poll.
        self._shards_read_at: float | None = None

    # -- loop -------------------------------------------------------------------------

    def run(self) -> None:
        while not self.stop_event.is_set():
            if self.may_run is not None and not self.may_run():
                self.stop_event.wait(self.poll_interval)
                continue
            try:
                busy = self.poll_once()
            except ClientError as exc:
                log.warning("stream %s: %s", self.consumer.name, exc)
                busy = False
            if busy:
                self.idle.clear()
            else:
                self.idle.set()
                self.stop_event.wait(self.poll_interval)

    def poll_once(self) -> bool:
        """Visit every readable shard once; True if anything was read or delivered."""
        now = time.monotonic()
        if self._shards_read_at is None or now - self._shards_read_at >= SHARD_LIST_SECONDS \
                or all(shard.closed for shard in self._shards.values()):
            # DescribeStream is DynamoDB Local's costliest stream call. A new shard
            # appears when one closes (which asks for the list at once), when the stream
            # has none open yet, or, rarely, beside the open ones: so while a shard is
            # open the list is read once a second, not on every idle poll.
            self._refresh_shards()
            self._shards_read_at = now
        busy = False
        for shard in list(self._shards.values()):
            if self.stop_event.is_set():
                break
            if shard.done():
                continue
            parent = self._shards.get(shard.parent or "")
            if parent is not None and not parent.done():
                continue  # order: a child shard waits for its parent to drain
            busy = self._poll_shard(shard) or busy
        if not busy and self.delivery is not None:
            busy = self._replay_held()
        return busy

    def _refresh_shards(self) -> None:
        start: str | None = None
        while True:
            kwargs: dict[str, Any] = {"StreamArn": self.stream_arn}
            if start:
                kwargs["ExclusiveStartShardId"] = start
            desc = self.streams.describe_stream(**kwargs)["StreamDescription"]
            for s in desc.get("Shards", []):
                if s["ShardId"] not in self._shards:
                    self._shards[s["ShardId"]] = _Shard(s["ShardId"], s.get("ParentShardId"))
            start = desc.get("LastEvaluatedShardId")
            if not start:
                return

    def _poll_shard(self, shard: _Shard) -> bool:
        read = False
        if not shard.pending and not shard.closed:
            read = self._read(shard)
        if shard.pending:
            self._deliver(shard)
            return True
        return read

    def _read(self, shard: _Shard) -> bool:
        if shard.iterator is None:
            kwargs: dict[str, Any] = {"StreamArn": self.stream_arn, "ShardId": shard.shard_id}
            if shard.checkpoint is None:
                kwargs["ShardIteratorType"] = self.consumer.starting_position
            else:
                kwargs["ShardIteratorType"] = "AFTER_SEQUENCE_NUMBER"
                kwargs["SequenceNumber"] = shard.checkpoint
            shard.iterator = self.streams.get_shard_iterator(**kwargs)["ShardIterator"]
        try:
            resp = self.streams.get_records(ShardIterator=shard.iterator, Limit=1000)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in ("ExpiredIteratorException", "TrimmedDataAccessException"):
                shard.iterator = None  # start again from the checkpoint
                return False
            raise
        records = resp.get("Records", [])
        shard.iterator = resp.get("NextShardIterator")
        if shard.iterator is None:
            shard.closed = True
            self._shards_read_at = None  # its children are listed on the next poll
        elif not records and shard.checkpoint is None:
            # DynamoDB Local quirk: the iterator an empty, never-read shard hands back
            # fails with TrimmedDataAccessException once a record arrives. Ask for
            # TRIM_HORIZON again until the first record has been seen.
            shard.iterator = None
        for raw in records:
            rec = lambda_record(raw, stream_arn=self.stream_arn, region=self.region)
            if matches_any(self.consumer.filter_patterns, rec):
                shard.pending.append(rec)
            else:
                self.stats.filtered_out += 1
                if not shard.pending:
                    shard.checkpoint = rec["dynamodb"]["SequenceNumber"]
        return bool(records)

    # -- delivery ---------------------------------------------------------------------

    def _deliver(self, shard: _Shard) -> None:
        self._drop_expired(shard)
        if not shard.pending:
            return
        size = min(self.consumer.batch_size, shard.bisect or self.consumer.batch_size)
        batch = [shard.pending[i] for i in range(min(size, len(shard.pending)))]
        head = batch[0]["dynamodb"]["SequenceNumber"]
        if head != shard.head:
            shard.head, shard.attempts = head, 0
        if self.delivery is not None:
            failed, error = self._invoke_planned(self.delivery, batch)
        else:
            failed, error = self._invoke(batch)
            if self.deliver_twice and error is None:
                failed, error = self._invoke(batch)  # at-least-once: the same batch again
        if error is None and not failed:
            self._advance(shard, len(batch))
            shard.bisect = None
            return
        shard.attempts += 1
        self.stats.retries += 1
        if error is not None:
            # A function error: retry the whole batch, halved when bisect is on.
            first = 0
            if self.consumer.bisect_batch_on_error and len(batch) > 1:
                shard.bisect = max(1, len(batch) // 2)
            error_type = type(error).__name__
            reason = f"handler raised {error_type}: {error}"
            giving_up = batch
        else:
            first = min(failed)
            error_type = "BatchItemFailure"
            reason = "reported as a batch item failure"
            giving_up = [batch[i] for i in sorted(failed)]
        if first:
            self._advance(shard, first)  # records before the first failure are done
            shard.head, shard.attempts = batch[first]["dynamodb"]["SequenceNumber"], 1
        if shard.attempts > self.consumer.max_retry_attempts:
            self.stats.dead_lettered += len(giving_up)
            self.dead_letter(giving_up, f"{reason}; gave up after {shard.attempts} attempts "
                                        f"({self.consumer.name} consumer)", error_type)
            self._advance(shard, len(batch) - first)
            shard.bisect = None
            return
        self.stop_event.wait(min(self.retry_backoff * 2 ** (shard.attempts - 1), 1.0))

    def _invoke(self, batch: list[dict[str, Any]]) -> tuple[set[int], BaseException | None]:
        self.stats.invocations += 1
        self.stats.records += len(batch)
        try:
            response = self.invoke({"Records": batch})
        except Exception as exc:  # a function error, as Lambda would see it
            log.warning("%s handler raised: %s", self.consumer.name, exc)
            return set(), exc
        if not self.consumer.report_batch_item_failures:
            return set(), None
        items = (response or {}).get("batchItemFailures") or []
        index = {r["dynamodb"]["SequenceNumber"]: i for i, r in enumerate(batch)}
        failed: set[int] = set()
        for item in items:
            ident = item.get("itemIdentifier") if isinstance(item, Mapping) else None
            if ident not in index:
                # Lambda treats an unknown or empty identifier as a failed batch.
                return set(range(len(batch))), None
            failed.add(index[ident])
        return failed, None

    def _invoke_planned(self, delivery: DeliveryPolicy,
                        batch: list[dict[str, Any]]) -> tuple[set[int], BaseException | None]:
        """Make the invocations ``delivery`` plans for ``batch``; a record of ``batch``
        failed if any invocation holding a copy of it failed it (or raised)."""
        index = {record_key(r): i for i, r in enumerate(batch)}
        plan = delivery.plan(batch)
        missing = set(index) - {record_key(r) for invocation in plan for r in invocation}
        if missing:
            raise ValueError(f"delivery policy dropped records {sorted(missing)}")
        failed: set[int] = set()
        error: BaseException | None = None
        for invocation in plan:
            mine = [index.get(record_key(r)) for r in invocation]
            bad, exc = self._invoke(invocation)
            if exc is not None:
                bad = set(range(len(invocation)))
                if error is None and any(i is not None for i in mine):
                    error = exc
            for i in bad:
                j = mine[i]
                if j is None:
                    self.stats.replay_failures += 1
                elif exc is None:
                    failed.add(j)
        return failed, error

    def _replay_held(self) -> bool:
        """Deliver the copies the policy still holds back; True if there were any."""
        assert self.delivery is not None
        plan = self.delivery.drain()
        for invocation in plan:
            bad, exc = self._invoke(invocation)
            if exc is not None or bad:
                self.stats.replay_failures += len(invocation) if exc is not None else len(bad)
        return bool(plan)

    def _advance(self, shard: _Shard, count: int) -> None:
        for _ in range(min(count, len(shard.pending))):
            rec = shard.pending.popleft()
            shard.checkpoint = rec["dynamodb"]["SequenceNumber"]

    def _drop_expired(self, shard: _Shard) -> None:
        limit = self.consumer.max_record_age_seconds
        if limit is None or limit < 0:
            return
        now = self.clock()
        old: list[dict[str, Any]] = []
        while (shard.pending
               and now - shard.pending[0]["dynamodb"]["ApproximateCreationDateTime"] > limit):
            old.append(shard.pending[0])
            self._advance(shard, 1)
        if old:
            self.stats.dead_lettered += len(old)
            self.dead_letter(old, f"record older than {limit} s (max record age)",
                             "RecordTooOld")
