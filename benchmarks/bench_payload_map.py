"""A run whose input is a 100,000-element list (several MB, in the payload bucket) feeding
a map (issue 27's target): wall time, DynamoDB requests and capacity, S3 requests, and
cost per element, on DynamoDB Local and moto's S3 server.

    ./scripts/bench --only payload_map        (--quick: 2,000 elements)
    WHIMBREL_BENCH_PAYLOAD_MAP_ELEMENTS=20000 ./scripts/bench --only payload_map

The list's elements come in batches of ``BATCH``: ``{"batches": [[key, ...], ...]}``, one
no-op item per batch, as when a map had at most 10,000 items (``MAX_MAP_ITEMS`` is
100,000 now; a flat map of 100,000 items is ``benchmarks/bench_code_map.py``), so its
figures compare with the earlier runs.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.common import Ctx, md_table, wait_end
from benchmarks.shapes import NOOP
from whimbrel import ActivityDefinition, Whimbrel, WorkflowDefinition
from whimbrel.local.s3 import LocalS3
from whimbrel.testing import fresh_table_prefix

WORKERS = 32  # activity threads of the client running the items
LANES = 200  # the map's max_concurrency
BATCH = 10  # elements per map item
#: us-east-1 list prices, dollars per unit or request.
WRU, RRU, PUT, GET = 0.625e-6, 0.125e-6, 5.0e-6, 0.4e-6


def element(i: int) -> str:
    """One element: what a listing of a bucket's keys holds (~40 bytes of JSON)."""
    return f"raw/2026/11/27/events-{i:07d}.parquet"


@contextmanager
def local_bucket() -> Iterator[str]:
    """moto's S3 server and a bucket on it, with ``AWS_ENDPOINT_URL_S3`` set meanwhile."""
    before = os.environ.get("AWS_ENDPOINT_URL_S3")
    with LocalS3() as s3:
        os.environ["AWS_ENDPOINT_URL_S3"] = s3.url
        try:
            yield s3.create_bucket("whimbrel-bench-payload-map")
        finally:
            if before is None:
                os.environ.pop("AWS_ENDPOINT_URL_S3", None)
            else:
                os.environ["AWS_ENDPOINT_URL_S3"] = before


def run(ctx: Ctx) -> dict[str, Any]:
    # A size between the two for a machine where 100,000 takes too long.
    elements = int(os.environ.get("WHIMBREL_BENCH_PAYLOAD_MAP_ELEMENTS") or
                   ctx.size(100_000, 2_000))
    items = elements // BATCH
    batches = [[element(i) for i in range(k, k + BATCH)] for k in range(0, elements, BATCH)]
    payload = {"batches": batches}
    input_bytes = len(json.dumps(payload))
    prefix = fresh_table_prefix()
    with local_bucket() as bucket, ctx.client(prefix, payload_bucket=bucket,
                                              max_workers=WORKERS) as wb, \
            Whimbrel(ctx.endpoint, prefix, payload_bucket=bucket) as view:  # polls, unmetered
        wb.register_workflow(WorkflowDefinition("listing_map", (ActivityDefinition(
            "each", launcher=NOOP, map_over="$input.batches", max_concurrency=LANES),)))
        wb.meter.reset()
        t0 = time.time()
        wx = wb.start_workflow("listing_map", payload)
        started_s = time.time() - t0
        wf = wait_end(view, wx, timeout=6 * 3600, poll=1.0)
        wall = float(wf.ended_epoch or 0) - t0
        m = wb.meter
        wru, rru = m.total_write_units, m.total_read_units
        s3 = dict(m.s3_requests)
        dollars = (wru * WRU + rru * RRU + s3.get("PutObject", 0) * PUT
                   + s3.get("GetObject", 0) * GET)
        return {"elements": elements, "batch": BATCH, "items": items, "lanes": LANES,
                "workers": WORKERS, "state": wf.state.value,
                "input_bytes": input_bytes, "start_s": started_s, "wall_s": wall,
                "ddb_requests": dict(m.calls), "ddb_requests_total": sum(m.calls.values()),
                "wru": wru, "rru": rru, "s3_requests": s3, "s3_bytes": dict(m.s3_bytes),
                "dollars": dollars, "dollars_per_million_elements": dollars / elements * 1e6}


def render(result: dict[str, Any], img: Path) -> dict[str, Any]:
    r = result
    n = r["elements"]
    head = ["elements / map items", "input JSON", "state", "start_workflow (s)", "wall (s)",
            "elements / s", "DynamoDB requests / element", "WRU / element", "RRU / element",
            "S3 PUT", "S3 GET", "$ per million elements"]
    rows = [[f"{n:,} / {r['items']:,}", f"{r['input_bytes'] / 1e6:.1f} MB", r["state"],
             f"{r['start_s']:.1f}", f"{r['wall_s']:.0f}", f"{n / r['wall_s']:.0f}",
             f"{r['ddb_requests_total'] / n:.3f}", f"{r['wru'] / n:.3f}",
             f"{r['rru'] / n:.3f}", r["s3_requests"].get("PutObject", 0),
             r["s3_requests"].get("GetObject", 0), f"{r['dollars_per_million_elements']:.2f}"]]
    ops = sorted(r["ddb_requests"].items(), key=lambda kv: -kv[1])
    size_note = ("far past DynamoDB's 400 KB item" if r["input_bytes"] > 400_000 else
                 "under DynamoDB's 400 KB item in this quick run, over the 16 KB threshold")
    return {"table": md_table(head, rows), "size_note": size_note,
            "ops": ", ".join(f"{op} {k:,}" for op, k in ops),
            "s3": ", ".join(f"{op} {k:,}" for op, k in sorted(r["s3_requests"].items()))
            or "none",
            "r": r}
