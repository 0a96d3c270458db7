"""The billing proxy's throttling mode: AWS's on-demand limits, scaled down, enforced.

Per partition-key value of every table and index, a token bucket of
``1,000 / scale`` WCU/s and ``3,000 / scale`` RCU/s; per table, one of
``40,000 / scale`` WCU/s (and RCU/s), the default account quota for one on-demand table.
A bucket holds ``burst_seconds`` of its rate. Before a request is sent, the proxy works
out every key it would draw on (the item's, and each index entry's, old and new: see
:mod:`benchmarks.keys`); if any of those buckets is empty, DynamoDB's answer comes back
instead — HTTP 400, ``ProvisionedThroughputExceededException`` for a key (an index key
included: a throttled index throttles the base-table write, as on AWS) and
``ThrottlingException`` for the table quota — and nothing is written. Otherwise the
request goes through and its billed units are drawn afterwards (a bucket may go below
zero; it then refuses until it has refilled). AWS bills no throttled request; nor does
this proxy.

A scale of 50 (the default) makes the limits 20 WCU/s and 60 RCU/s per key and 800 WCU/s
per table: low enough that one DynamoDB Local on two cores can reach them, high enough
that a workload spread over keys is not throttled.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.keys import Cat

PTEE = "ProvisionedThroughputExceededException"
THROTTLING = "ThrottlingException"
_TYPE = "com.amazonaws.dynamodb.v20120810#"
#: AWS's published on-demand limits, per second.
KEY_WCU, KEY_RCU, TABLE_UNITS = 1000.0, 3000.0, 40000.0


@dataclass
class Bucket:
    rate: float
    burst_seconds: float
    tokens: float = float("nan")
    at: float = 0.0

    def level(self, now: float) -> float:
        if self.tokens != self.tokens:  # new: full
            self.tokens, self.at = self.rate * self.burst_seconds, now
        self.tokens = min(self.rate * self.burst_seconds,
                          self.tokens + (now - self.at) * self.rate)
        self.at = now
        return self.tokens


@dataclass
class Throttle:
    """Token buckets at AWS's limits divided by ``scale``. Thread-safe."""

    scale: float = 50.0
    burst_seconds: float = 1.0
    #: The time, in seconds (tests may stop it).
    clock: Callable[[], float] = time.monotonic
    #: Throttled answers, by ``"<code> <table or table.index>"``.
    throttled: Counter[str] = field(default_factory=Counter)
    _buckets: dict[tuple[str, Cat, str], Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.throttled.values())

    def _bucket(self, kind: str, cat: Cat, key: str) -> Bucket:
        rate = TABLE_UNITS if key == "" else KEY_WCU if kind == "w" else KEY_RCU
        got = self._buckets.get((kind, cat, key))
        if got is None:
            got = self._buckets[(kind, cat, key)] = Bucket(rate / self.scale,
                                                           self.burst_seconds)
        return got

    def refuse(self, kind: str, keys: list[tuple[Cat, str]]) -> tuple[str, str] | None:
        """The error code and message for a request drawing on ``keys`` (``kind`` ``w``
        or ``r``), or None to let it through."""
        now = self.clock()
        with self._lock:
            for cat, key in keys:
                table = cat.split(".")[0]
                if self._bucket(kind, table, "").level(now) <= 0:
                    self.throttled[f"{THROTTLING} {table}"] += 1
                    return THROTTLING, (f"Throughput exceeds the current throughput limit "
                                        f"for your account on table {table}")
                if self._bucket(kind, cat, key).level(now) <= 0:
                    self.throttled[f"{PTEE} {cat}"] += 1
                    return PTEE, ("Throughput exceeds the current capacity of your table or "
                                  f"index ({cat}, key {key[:40]}). DynamoDB is automatically "
                                  "scaling your table or index so please try again shortly.")
        return None

    def draw(self, kind: str, units: dict[tuple[Cat, str], float]) -> None:
        """Take a request's billed units from the buckets of its keys and tables."""
        now = self.clock()
        with self._lock:
            for (cat, key), n in units.items():
                for bucket in (self._bucket(kind, cat, key),
                               *((self._bucket(kind, cat, ""),) if "." not in cat else ())):
                    bucket.level(now)
                    bucket.tokens -= n


def answer(code: str, message: str) -> tuple[int, list[tuple[str, str]], bytes]:
    """DynamoDB's HTTP answer for a throttled request."""
    body = json.dumps({"__type": _TYPE + code, "message": message}).encode()
    return 400, [("Content-Type", "application/x-amz-json-1.0"),
                 ("x-amz-crc32", str(zlib.crc32(body)))], body
