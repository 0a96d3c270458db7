"""Tracing (issue 21 item 7): one trace from the caller through the rows and the Lambdas
into the activity's own code, exported to the SDK's in-memory exporter, on DynamoDB
Local (whimbrel/engine/tracing.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from whimbrel import (
    ActivityDefinition,
    LauncherSpec,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.engine.tracing import headers
from whimbrel.local.runtime import LambdaContext
from whimbrel.testing import wait_until

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # lambdas/ sits next to whimbrel/ in the checkout
    sys.path.append(str(ROOT))

from tracing_support import reset_trace_globals  # noqa: E402

from lambdas import workflow_request  # noqa: E402

TRACED = LauncherSpec.python("wb_test_activities:traced")
FLOW = WorkflowDefinition("traced", (
    ActivityDefinition("A", launcher=TRACED),
    ActivityDefinition("B", ("A",), launcher=TRACED),
))


@pytest.fixture
def traced_wb(wb: Whimbrel) -> Whimbrel:
    wb.register_workflow(FLOW)
    return wb


def by_name(exported: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in exported:
        out.setdefault(span.name, []).append(span)
    return out


def wait_for_spans(exporter: InMemorySpanExporter, name: str, count: int,
                   timeout: float = 30.0) -> dict[str, list[ReadableSpan]]:
    def enough() -> dict[str, list[ReadableSpan]] | None:
        got = by_name(exporter.get_finished_spans())
        return got if len(got.get(name, [])) >= count else None

    try:  # polls the exporter (the run's last span comes at its end)
        return wait_until(enough, timeout=timeout)
    except AssertionError:  # the caller's assertions say what is missing
        return by_name(exporter.get_finished_spans())


def check_run_trace(got: dict[str, list[ReadableSpan]], trace_id: int,
                    caller_span: int) -> None:
    """The run's spans: the root under the caller, each attempt, launch, the activity's
    own spans and the end under the root, all in the caller's trace."""
    (root,) = got["whimbrel.run traced"]
    assert root.parent is not None and root.parent.span_id == caller_span
    root_id = root.context.span_id
    everything = [s for spans in got.values() for s in spans]
    assert {s.context.trace_id for s in everything} == {trace_id}
    attempts = got["whimbrel.attempt A"] + got["whimbrel.attempt B"]
    assert len(attempts) == 2
    for span in attempts:
        assert span.parent is not None and span.parent.span_id == root_id
        assert span.attributes is not None and span.attributes["whimbrel.state"] == "COMPLETED"
        assert span.start_time is not None and span.end_time is not None
        assert span.end_time > span.start_time  # times taken from the row
        assert [e.name for e in span.events][-1] == "state COMPLETED"
    for span in got["whimbrel.launch A"] + got["whimbrel.launch B"]:
        assert span.parent is not None and span.parent.span_id == root_id
    (end,) = got["whimbrel.run.end traced"]
    assert end.parent is not None and end.parent.span_id == root_id
    assert end.attributes is not None and end.attributes["whimbrel.state"] == "COMPLETED"
    runs = {s.attributes["whimbrel.activity_name"]: s  # type: ignore[index]
            for s in got["whimbrel.activity A"] + got["whimbrel.activity B"]}
    assert set(runs) == {"A", "B"}
    for span in runs.values():
        assert span.parent is not None and span.parent.span_id == root_id
    own = got["own work"]
    assert {s.parent.span_id for s in own if s.parent} == {
        s.context.span_id for s in runs.values()}  # the activity's own spans join


def test_a_run_started_through_the_python_api_is_one_trace(
        traced_wb: Whimbrel, spans: InMemorySpanExporter) -> None:
    tracer = trace.get_tracer("caller")
    with tracer.start_as_current_span("caller") as caller:
        wx = traced_wb.start_workflow("traced", {"n": 1})
    wf = traced_wb.wait(wx, timeout=30)
    assert wf.state is WorkflowState.COMPLETED
    got = wait_for_spans(spans, "whimbrel.run.end traced", 1)
    ctx = caller.get_span_context()
    check_run_trace(got, ctx.trace_id, ctx.span_id)
    # The context handed to code that runs elsewhere names the activity's span.
    (run_a,) = got["whimbrel.activity A"]
    handed = wf.output["A"]["trace_context"]["traceparent"]
    assert handed.startswith(f"00-{ctx.trace_id:032x}-{run_a.context.span_id:016x}-")
    # The rows carry the root's context (a newline would separate a tracestate).
    (root,) = got["whimbrel.run traced"]
    row = traced_wb.store.get_workflow(wx)
    assert row is not None and headers(row.traceparent)["traceparent"].startswith(
        f"00-{ctx.trace_id:032x}-{root.context.span_id:016x}-")


def test_a_raw_request_row_carries_its_traceparent_through_the_handlers(
        traced_wb: Whimbrel, spans: InMemorySpanExporter,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    trace_id, parent = 0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7
    item = {"workflow_request_id": {"S": "traced-row-1"},
            "workflow_name": {"S": "traced"}, "input": {"M": {"n": {"N": "2"}}},
            "traceparent": {"S": f"00-{trace_id:032x}-{parent:016x}-01\nvendor=abc"}}
    table = traced_wb.store.table_name("workflow_request")
    boto3.client("dynamodb", endpoint_url=traced_wb.endpoint_url,
                 region_name=os.environ.get("AWS_REGION", "us-east-1")).put_item(
        TableName=table, Item=item)
    record = {"eventID": "1", "eventName": "INSERT", "eventVersion": "1.1",
              "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
              "eventSourceARN": f"arn:aws:dynamodb:us-east-1:1:table/{table}/stream/s",
              "dynamodb": {"ApproximateCreationDateTime": float(int(time.time())),
                           "Keys": {"workflow_request_id": item["workflow_request_id"]},
                           "NewImage": item, "SequenceNumber": "1", "SizeBytes": 1,
                           "StreamViewType": "NEW_AND_OLD_IMAGES"}}
    result = workflow_request.handler({"Records": [record]},
                                      LambdaContext("traced", traced_wb))
    assert result == {"batchItemFailures": []}
    wx = workflow_exec_id_for("traced-row-1")
    assert traced_wb.wait(wx, timeout=30).state is WorkflowState.COMPLETED
    got = wait_for_spans(spans, "whimbrel.run.end traced", 1)
    check_run_trace(got, trace_id, parent)
    row = traced_wb.store.get_workflow(wx)
    assert row is not None and headers(row.traceparent).get("tracestate") == "vendor=abc"


def test_nothing_is_recorded_without_a_tracer_provider(traced_wb: Whimbrel) -> None:
    reset_trace_globals()
    wx = traced_wb.start_workflow("traced")
    assert traced_wb.wait(wx, timeout=30).state is WorkflowState.COMPLETED
    row = traced_wb.store.get_workflow(wx)
    assert row is not None and row.traceparent is None
    out = traced_wb.get_workflow(wx).output["A"]
    assert out == {"trace_context": {}}


def test_the_console_exporter_snippet_in_the_docs_runs_as_written(
        ddb_endpoint: str, table_prefix: str) -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text[text.index("## Tracing"):]
    snippet = section[section.index("```python\n") + 10:section.index("\n```\n")]
    default = 'Whimbrel(endpoint_url="http://localhost:8000")'
    assert default in snippet
    code = snippet.replace(default, f"Whimbrel(endpoint_url={ddb_endpoint!r}, "
                                    f"table_prefix={table_prefix!r})")
    code += "\nwb.store.delete_tables()\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    printed = done.stdout
    for name in ("nightly job", "whimbrel.run hello", "whimbrel.launch greet",
                 "whimbrel.activity greet", "whimbrel.attempt greet",
                 "whimbrel.run.end hello"):
        assert f'"name": "{name}"' in printed, name
    trace_ids = {line.split('"trace_id": "')[1][:34] for line in printed.splitlines()
                 if '"trace_id": "' in line}
    assert len(trace_ids) == 1  # one trace, the caller's
