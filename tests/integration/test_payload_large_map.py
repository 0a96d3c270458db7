"""Issue 27, "a map of 10,000 items" for items of any size: a run whose input list (1,000
elements of 4 KB: 4 MB of JSON, ten times DynamoDB's 400 KB item) feeds a map, whose
outputs (as large again) feed a downstream; on DynamoDB Local and moto's S3. A list of
100,000 (in batches of 10) is the benchmark ``./scripts/bench --only payload_map``; a
code workflow's ``ctx.map`` of 100,000 items is ``python -m benchmarks.bench_code_map``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import LauncherSpec, Whimbrel, WorkflowDefinition, WorkflowState
from whimbrel.contract.dataflow import MAX_MAP_ITEMS

ITEMS, PAD = 1_000, 4_002


@pytest.fixture
def wb(ddb_endpoint: str, table_prefix: str, payload_bucket: str) -> Iterator[Whimbrel]:
    client = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                      payload_bucket=payload_bucket, max_workers=16)
    client.create_tables()
    yield client
    client.close()
    client.store.delete_tables()


def test_a_list_of_four_megabytes_feeds_a_map_and_its_outputs_a_downstream(
        wb: Whimbrel) -> None:
    wb.register_workflow(WorkflowDefinition("wide", (
        Act("each", launcher=LauncherSpec.python("payload_activities:element"),
            map_over="$input.xs", max_concurrency=50),
        Act("sum", launcher=LauncherSpec.python("payload_activities:tally"),
            depends_on=("each",)),
    )))
    xs = [{"i": i, "pad": f"{i:06d}" * (PAD // 6)} for i in range(ITEMS)]
    size = len(json.dumps({"xs": xs}))
    assert size > 10 * 400_000
    wx = wb.start_workflow("wide", {"xs": xs})
    wf = wb.wait(wx, timeout=300)
    assert wf.state is WorkflowState.COMPLETED, wf.error
    assert wf.activity("sum").output == {"items": ITEMS, "chars": ITEMS * (PAD // 6) * 6,
                                         "in_order": True}
    # The list was read from S3 once by this process (the items' inputs are its
    # elements, kept in their own rows), not once per item.
    gets = wb.meter.s3_requests.get("GetObject", 0)
    assert wb.meter.s3_requests["PutObject"] >= 2 and gets <= 5, dict(wb.meter.s3_requests)


def test_a_list_past_max_map_items_fails_the_map_naming_the_limit(wb: Whimbrel) -> None:
    # 100,001 elements (~300 KB of JSON: in S3) is one more than a map may have.
    wb.register_workflow(WorkflowDefinition("too_long", (
        Act("each", map_over="$input.xs", max_concurrency=10),)))
    run = wb.wait(wb.start_workflow("too_long", {"xs": [0] * (MAX_MAP_ITEMS + 1)}),
                  timeout=60)
    assert run.state is WorkflowState.FAILED and run.items == ()
    node = run.activity("each")
    assert "has 100001 elements, more than the limit of 100000" in (node.error or "")
    assert node.error_type == "InvalidMapInput"
