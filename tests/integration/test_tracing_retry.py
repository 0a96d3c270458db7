"""Issue 30 item 5: a retry that the sweep launches (its back-off ran out in another
process, with no trace of its own) joins the run's trace: its launch, its attempt, the
activity's own span and the run's end are all children of the run's root span, in the
caller's trace. Exported to the SDK's in-memory exporter, on DynamoDB Local."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import boto3
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_tracing import wait_for_spans

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.testing import wait_until

ROOT = Path(__file__).resolve().parents[2]
#: ``clock`` is tests/integration/conftest.py's ManualClock (real time plus an offset);
#: not imported: another folder's conftest module has the same name.
FLAKY = WorkflowDefinition("flaky_traced", (ActivityDefinition(
    "A", launcher=LauncherSpec.python("wb_test_activities:flaky"),
    retry=RetryPolicy(max_attempts=2, initial_interval_seconds=600)),))


def test_a_retry_launched_by_the_sweep_joins_the_runs_trace(
        wb: Whimbrel, clock: Any, spans: InMemorySpanExporter) -> None:
    wb.register_workflow(FLAKY)
    with trace.get_tracer("caller").start_as_current_span("caller") as caller:
        wx = wb.start_workflow("flaky_traced")
    ctx = caller.get_span_context()

    def retry_waits() -> bool:
        wf = wb.get_workflow(wx)
        return len(wf.activities) == 2 and wf.activity("A").state is ActivityState.REQUESTED
    wait_until(retry_waits, timeout=30, message="the first attempt never failed")
    # The back-off runs out; the sweep (no span of its own) launches attempt 2.
    assert not trace.get_current_span().get_span_context().is_valid
    clock.advance(601)
    wb.sweep(clock())
    assert wb.wait(wx, timeout=30).state is WorkflowState.COMPLETED
    got = wait_for_spans(spans, "whimbrel.run.end flaky_traced", 1)
    (root,) = got["whimbrel.run flaky_traced"]
    root_id = root.context.span_id
    assert root.parent is not None and root.parent.span_id == ctx.span_id
    attempts = {s.attributes["whimbrel.attempt"]: s  # type: ignore[index]
                for s in got["whimbrel.attempt A"]}
    assert set(attempts) == {1, 2}
    assert attempts[1].attributes["whimbrel.state"] == "FAILED"  # type: ignore[index]
    assert attempts[2].attributes["whimbrel.state"] == "COMPLETED"  # type: ignore[index]
    own = {s.attributes["whimbrel.attempt"]: s  # type: ignore[index]
           for s in got["whimbrel.activity A"]}
    assert set(own) == {1, 2}
    launches = got.get("whimbrel.launch A", [])
    assert len(launches) == 2
    for span in [*attempts.values(), *own.values(), *launches,
                 *got["whimbrel.run.end flaky_traced"]]:
        assert span.context.trace_id == ctx.trace_id, span.name
        assert span.parent is not None and span.parent.span_id == root_id, span.name


TIMED = WorkflowDefinition("timed_traced", (ActivityDefinition(
    "W", launcher=LauncherSpec.external(), schedule_to_start_seconds=30,
    retry=RetryPolicy(max_attempts=2, initial_interval_seconds=1)),))


def test_an_attempt_the_sweep_times_out_and_its_retry_join_the_runs_trace(
        wb: Whimbrel, clock: Any, spans: InMemorySpanExporter) -> None:
    wb.register_workflow(TIMED)
    with trace.get_tracer("caller").start_as_current_span("caller") as caller:
        wx = wb.start_workflow("timed_traced")
    ctx = caller.get_span_context()
    clock.advance(31)
    wb.sweep(clock())  # nobody claimed attempt 1: TIMED_OUT, its retry follows
    clock.advance(2)
    wb.sweep(clock())

    def claimable() -> bool:
        wf = wb.get_workflow(wx)
        return len(wf.activities) == 2 and wf.activity("W").state is ActivityState.READY
    wait_until(claimable, timeout=30, message="the retry was never made READY")
    got = wb.claim(workflow_name="timed_traced")
    assert got is not None and got.attempt == 2
    wb.transition_activity(got.activity_exec_id, "COMPLETED", output={"ok": True})
    assert wb.wait(wx, timeout=30).state is WorkflowState.COMPLETED
    found = wait_for_spans(spans, "whimbrel.run.end timed_traced", 1)
    (root,) = found["whimbrel.run timed_traced"]
    attempts = {s.attributes["whimbrel.attempt"]: s  # type: ignore[index]
                for s in found["whimbrel.attempt W"]}
    assert attempts[1].attributes["whimbrel.state"] == "TIMED_OUT"  # type: ignore[index]
    assert attempts[2].attributes["whimbrel.state"] == "COMPLETED"  # type: ignore[index]
    for span in [*attempts.values(), *found["whimbrel.run.end timed_traced"]]:
        assert span.context.trace_id == ctx.trace_id, span.name
        assert span.parent is not None and span.parent.span_id == root.context.span_id


def test_a_deployed_lambda_sets_up_exporting_from_its_environment() -> None:
    """In a Lambda (AWS_LAMBDA_FUNCTION_NAME set) the handlers' module sets up the
    provider the OTEL variables ask for, named after the function; each handler's spans
    are exported before it returns (the container is frozen after)."""
    code = textwrap.dedent("""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter)
        from lambdas import _shared
        provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider), provider
        print(provider.resource.attributes["service.name"])
        memory = InMemorySpanExporter()
        provider.add_span_processor(BatchSpanProcessor(memory, schedule_delay_millis=3600000))

        @_shared.spans_flushed
        def handler(event, context):
            with trace.get_tracer("t").start_as_current_span("in the handler"):
                return "done"

        assert handler({}, None) == "done"
        print([s.name for s in memory.get_finished_spans()])
    """)
    env = {**os.environ, "AWS_LAMBDA_FUNCTION_NAME": "whimbrel-heartbeat",
           "OTEL_TRACES_EXPORTER": "console", "POWERTOOLS_METRICS_DISABLED": "true",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("OTEL_SERVICE_NAME", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "whimbrel-heartbeat"
    assert "['in the handler']" in lines  # exported before the handler returned


def test_a_lost_attempt_is_recorded_in_the_runs_trace(
        wb: Whimbrel, clock: Any, spans: InMemorySpanExporter) -> None:
    """The reconciler's LOST record of a vanished attempt row carries the run's trace
    context, so its end's span joins the run's trace like any attempt's (it had none)."""
    wb.register_workflow(WorkflowDefinition("lossy_traced", (ActivityDefinition(
        "w", launcher=LauncherSpec.external(), retry=RetryPolicy(max_attempts=1)),)))
    with trace.get_tracer("caller").start_as_current_span("caller"):
        wx = wb.start_workflow("lossy_traced")
    got = wait_until(lambda: wb.claim(workflow_name="lossy_traced"), timeout=15,
                     message="nothing to claim")
    first = got.activity_exec_id
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    ddb.delete_item(TableName=f"{wb.table_prefix}activity_exec",  # the row vanishes
                    Key={"workflow_exec_id": {"S": wx}, "activity_exec_id": {"S": first}})
    for _ in range(2):
        clock.advance(2 * 3600.0)  # past any reconcile interval
        assert not wb.sweep(clock()).errors
    lost = wb.store.get_activity(first)
    run = wb.store.get_workflow(wx)
    assert lost is not None and lost.state is ActivityState.LOST, lost
    assert run is not None and run.traceparent
    assert lost.traceparent == run.traceparent
