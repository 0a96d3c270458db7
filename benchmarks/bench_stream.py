"""Simple API throughput: ``activity_event`` records per second per stream shard through
the local stream pump and the real ``activity_event`` handler, the batch's records one
by one and then at the same time (``lambdas._shared.RECORD_THREADS``); and the DynamoDB
calls a record costs, from which the deployed ceiling is worked out in the report."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3

from benchmarks.common import Ctx, median
from benchmarks.shapes import EXTERNAL
from lambdas import _shared
from whimbrel import ActivityDefinition, Whimbrel, WorkflowDefinition, WorkflowState
from whimbrel.local.runtime import LocalRuntime
from whimbrel.store import consumers, specs
from whimbrel.testing import fresh_table_prefix

#: An assumed DynamoDB round trip from Lambda in the same region (ms), for the ceiling.
AWS_ROUND_TRIP_MS = 8.0


def _once(ctx: Ctx, records: int, threads: int) -> dict[str, Any]:
    _shared.RECORD_THREADS, _shared._pool = threads, None  # a pool of this size
    prefix = fresh_table_prefix()
    with LocalRuntime(ctx.endpoint, prefix, heartbeat_rate_seconds=0,
                      lambda_log_level="WARNING") as rt:
        wb = rt.client
        wb.register_workflow(WorkflowDefinition("stream_one", (
            ActivityDefinition("work", launcher=EXTERNAL),)))
        with ThreadPoolExecutor(16) as pool:
            runs = list(pool.map(lambda _: wb.start_workflow("stream_one"), range(records)))
        claimed: list[str] = []
        while len(claimed) < records:
            if (act := wb.claim(workflow_name="stream_one")) is not None:
                claimed.append(act.activity_exec_id)
        pump = rt.pumps[consumers.ACTIVITY_EVENT_CONSUMER.name]
        rt.wait_idle(60)
        before, calls = pump.stats.records, wb.meter.total_calls
        t0 = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda a: wb.send_activity_event(a, "COMPLETED"), claimed))
        sent = time.perf_counter() - t0
        deadline = time.monotonic() + 600
        left = set(runs)
        with Whimbrel(ctx.endpoint, prefix) as view:  # polls, not counted
            while left and time.monotonic() < deadline:
                left = {wx for wx in left if view.get_workflow(wx).state is not
                        WorkflowState.COMPLETED}
                time.sleep(0.05)
        seconds = time.perf_counter() - t0
        calls = wb.meter.total_calls - calls - records  # less the rows' own puts
        arn = boto3.client("dynamodb", endpoint_url=ctx.endpoint).describe_table(
            TableName=specs.ACTIVITY_EVENT.table_name(prefix))["Table"]["LatestStreamArn"]
        shards = len(boto3.client("dynamodbstreams", endpoint_url=ctx.endpoint)
                     .describe_stream(StreamArn=arn)["StreamDescription"]["Shards"])
        return {"records": records, "threads": threads, "seconds": seconds, "put_s": sent,
                "delivered": pump.stats.records - before, "shards": shards,
                "lost": len(left), "per_s_per_shard": records / seconds / shards,
                "calls_per_record": calls / records}


def run(ctx: Ctx) -> dict[str, Any]:
    records = ctx.size(400, 60)
    out: dict[str, Any] = {"records": records, "batch_size":
                           consumers.ACTIVITY_EVENT_CONSUMER.batch_size}
    for name, threads in (("one_by_one", 1), ("concurrent", 10)):
        runs = [_once(ctx, records, threads) for _ in range(ctx.repeats)]
        out[name] = {"runs": runs, "threads": threads,
                     "per_s_per_shard": median(r["per_s_per_shard"] for r in runs),
                     "calls_per_record": median(r["calls_per_record"] for r in runs)}
    _shared.RECORD_THREADS, _shared._pool = 10, None
    return out


def render(result: dict[str, Any], img: Path) -> dict[str, Any]:
    calls = result["concurrent"]["calls_per_record"]
    record_ms = calls * AWS_ROUND_TRIP_MS
    batch = result["batch_size"]
    in_flight = 10 * min(batch, 10)  # ParallelizationFactor x records at once per batch
    return {**result, "one": result["one_by_one"]["per_s_per_shard"],
            "many": result["concurrent"]["per_s_per_shard"], "calls": calls,
            "rt_ms": AWS_ROUND_TRIP_MS, "record_ms": record_ms, "in_flight": in_flight,
            "before": 1000.0 / record_ms, "after": in_flight * 1000.0 / record_ms}
