"""How long a Simple API result row is in flight: from its PutItem to its COMPLETED being
applied by the local runtime's stream handlers (what ``IN_FLIGHT_GRACE_SECONDS`` must
cover; docs/architecture.md, "Results written in time").

    python -m benchmarks.in_flight --endpoint http://127.0.0.1:8000 -n 30

Prints the median, 95th percentile and maximum of the in-flight time, and the load
average it was measured at.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

import boto3

from whimbrel import ActivityDefinition, LauncherSpec, WorkflowDefinition
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import fresh_table_prefix, wait_until


def measure(endpoint: str, n: int) -> list[float]:
    prefix = fresh_table_prefix()
    spans: list[float] = []
    with LocalRuntime(endpoint, prefix, heartbeat_rate_seconds=0,
                      lambda_log_level="WARNING") as rt:
        try:
            rt.client.register_workflow(WorkflowDefinition("in_flight", (ActivityDefinition(
                "w", launcher=LauncherSpec.external()),)))
            ddb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
            for _ in range(n):
                rt.client.start_workflow("in_flight")
                got = wait_until(lambda: rt.client.claim(workflow_name="in_flight"),
                                 timeout=30, message="nothing to claim")
                aeid = got.activity_exec_id
                put = time.time()
                ddb.put_item(TableName=f"{prefix}activity_event", Item={
                    "activity_event_id": {"S": str(uuid.uuid4())},
                    "activity_exec_id": {"S": aeid}, "transition": {"S": "COMPLETED"},
                    "when_epoch": {"N": str(put)}})
                wait_until(lambda aeid=aeid: rt.client.get_activity(aeid).state.value  # type: ignore[misc]
                           == "COMPLETED", timeout=30, interval=0.01,
                           message="the row was not applied")
                spans.append(time.time() - put)
        finally:
            rt.client.store.delete_tables()
    return spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("-n", type=int, default=30)
    args = parser.parse_args()
    spans = sorted(measure(args.endpoint, args.n))
    load = os.getloadavg()[0]
    p95 = spans[min(len(spans) - 1, int(0.95 * len(spans)))]
    print(f"in flight (PutItem -> applied), n={len(spans)}, load average {load:.1f}: "
          f"median {spans[len(spans) // 2]:.2f} s, p95 {p95:.2f} s, max {spans[-1]:.2f} s")


if __name__ == "__main__":
    main()
