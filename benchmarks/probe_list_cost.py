"""What one page of runs costs, by state alone, with no filter and by attribute, with 100
registered workflow names (issue 29: at most 64 requests for a page of 50), and how one
attribute value shared by many runs spreads over the ``by_attribute`` shards.

    python -m benchmarks.probe_list_cost [--runs 300] [--names 100]

Prints, per listing, the requests and read units of the client's meter (the calls
Whimbrel made; DynamoDB Local's units), and the hottest ``by_attribute`` key's share.
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

import boto3

from benchmarks.common import dynamodb
from whimbrel import (
    ActivityDefinition,
    LauncherSpec,
    RetryPolicy,
    Transition,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.store import specs
from whimbrel.testing import StepClock, fresh_table_prefix


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.probe_list_cost")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--names", type=int, default=100)
    args = parser.parse_args(argv)
    with dynamodb() as url:
        clock = StepClock()
        wb = Whimbrel(url, fresh_table_prefix(), clock=clock)
        wb.create_tables()
        for i in range(args.names):
            wb.register_workflow(WorkflowDefinition(f"cost_{i:03d}", (ActivityDefinition(
                "w", launcher=LauncherSpec.external(), retry=RetryPolicy(max_attempts=1)),)))
        for i in range(args.runs):
            clock.advance(1)
            wb.start_workflow(f"cost_{i % args.names:03d}", attributes={"tenant": "big"})
        for i in range(0, args.runs, 4):  # every fourth run FAILED
            got = wb.claim(workflow_name=f"cost_{i % args.names:03d}")
            assert got is not None
            wb.transition_activity(got.activity_exec_id, Transition.FAILED, error="x")
        listings: list[tuple[str, dict[str, Any]]] = [
            ("state=RUNNING", {"state": "RUNNING"}), ("state=FAILED", {"state": "FAILED"}),
            ("no filter", {}), ("attribute tenant=big", {"attributes": {"tenant": "big"}})]
        for label, kw in listings:
            wb.meter.reset()
            page = wb.list_workflows(limit=50, **kw)
            print(f"{label}: {len(page.items)} runs, {sum(wb.meter.calls.values())} requests "
                  f"{dict(wb.meter.calls)}, {sum(wb.meter.read_units.values()):.1f} RRU")
        table = specs.WORKFLOW_ATTRIBUTE.table_name(wb.table_prefix)
        keys = Counter(i["attr_key"]["S"] for i in boto3.client(
            "dynamodb", endpoint_url=url).scan(TableName=table)["Items"])
        top, hot = keys.most_common(1)[0]
        print(f"by_attribute: {sum(keys.values())} entries of one value over {len(keys)} "
              f"keys; hottest {top} holds {hot} ({hot / sum(keys.values()):.1%})")
        wb.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
