"""What a hand-off costs with a 1 KB, a 1 MB and a 10 MB output (issue 27): DynamoDB
units, S3 requests, dollars at list prices, and time, on DynamoDB Local and moto's S3.

    python -m benchmarks.probe_payloads [--runs 5]

Each run is ``a -> b`` (external activities) on a client with a payload bucket. The
*writer* (one process) completes ``a`` with the output: the object is put (over the 16 KB
threshold), the attempt's item written, ``b`` readied. The *reader* (another process,
nothing cached) then reads what ``b`` sees of its upstream, as ``ActivityRun.upstream``
does. Units are what DynamoDB Local reports (AWS bills the same for these requests);
dollars use us-east-1 on-demand list prices. Times are medians on this machine: a local
S3 and a local DynamoDB, both in-process or on loopback — in a region each S3 request
adds ~10-30 ms of network.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from whimbrel import ActivityDefinition as Act
from whimbrel import LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract.ids import activity_exec_id
from whimbrel.local.dynamodb_install import find_dynamodb_local, install_dynamodb_local
from whimbrel.local.dynamodb_local import SHORT_LIVED_JVM, DynamoDBLocal, local_env
from whimbrel.local.s3 import LocalS3
from whimbrel.testing import fresh_table_prefix
from whimbrel.worker.run import upstream_outputs

#: us-east-1 list prices, dollars per request or unit.
WRU, RRU = 0.625e-6, 0.125e-6
PUT, GET = 5.0e-6, 0.4e-6
SIZES = {"1 KB": 1_000, "1 MB": 1_000_000, "10 MB": 10_000_000}


def _units(wb: Whimbrel) -> tuple[float, float, dict[str, int]]:
    m = wb.meter
    return m.total_write_units, m.total_read_units, dict(m.s3_requests)


def measure(endpoint: str, bucket: str, runs: int) -> list[dict[str, Any]]:
    prefix = fresh_table_prefix()
    writer = Whimbrel(endpoint_url=endpoint, table_prefix=prefix, payload_bucket=bucket)
    writer.create_tables()
    writer.register_workflow(WorkflowDefinition("handoff", (
        Act("a", launcher=LauncherSpec.external()),
        Act("b", launcher=LauncherSpec.external(), depends_on=("a",)))))
    rows = []
    try:
        for label, size in SIZES.items():
            output = {"data": "x" * (size - 12)}
            w_times, r_times = [], []
            w_units: list[tuple[float, float, dict[str, int]]] = []
            r_units: list[tuple[float, float, dict[str, int]]] = []
            for _ in range(runs):
                wx = writer.start_workflow("handoff")
                a, b = activity_exec_id(wx, "a", 1), activity_exec_id(wx, "b", 1)
                writer.transition_activity(a, "RUNNING")
                writer.meter.reset()
                started = time.perf_counter()
                writer.transition_activity(a, "COMPLETED", output=output)
                w_times.append(time.perf_counter() - started)
                w_units.append(_units(writer))
                reader = Whimbrel(endpoint_url=endpoint, table_prefix=prefix,
                                  payload_bucket=bucket)
                try:
                    view = reader.get_activity(b)
                    reader.meter.reset()
                    started = time.perf_counter()
                    seen = upstream_outputs(reader.engine, view)
                    r_times.append(time.perf_counter() - started)
                    r_units.append(_units(reader))
                    assert seen["a"] == output
                finally:
                    reader.close()
            wru = statistics.median(u[0] for u in w_units)
            rru = statistics.median(u[1] for u in r_units) + statistics.median(
                u[1] for u in w_units)
            puts = statistics.median(u[2].get("PutObject", 0) for u in w_units)
            gets = statistics.median(u[2].get("GetObject", 0) for u in r_units)
            rows.append({
                "size": label, "wru": wru, "rru": rru, "puts": puts, "gets": gets,
                "dollars_per_million": (wru * WRU + rru * RRU + puts * PUT + gets * GET) * 1e6,
                "write_ms": statistics.median(w_times) * 1000,
                "read_ms": statistics.median(r_times) * 1000,
            })
    finally:
        writer.close()
        writer.store.delete_tables()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="hand-offs per size")
    args = parser.parse_args()
    with DynamoDBLocal(directory=install_dynamodb_local(find_dynamodb_local()),
                       java_options=SHORT_LIVED_JVM) as ddb, LocalS3() as s3:
        os.environ.update({**local_env(ddb.endpoint_url), "AWS_ENDPOINT_URL_S3": s3.url})
        bucket = s3.create_bucket("whimbrel-bench-payloads")
        rows = measure(ddb.endpoint_url, bucket, args.runs)
    print("| output | WRU | RRU | S3 PUT | S3 GET | $ per million hand-offs "
          "| complete (writer), ms | read upstream (reader), ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['size']} | {r['wru']:g} | {r['rru']:g} | {r['puts']:g} | {r['gets']:g} "
              f"| {r['dollars_per_million']:.2f} | {r['write_ms']:.1f} | {r['read_ms']:.1f} |")


if __name__ == "__main__":
    main()
