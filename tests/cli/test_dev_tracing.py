"""Issue 30 item 5: ``whimbrel dev`` exports spans when the standard OpenTelemetry
variables are set — here to a stub OTLP/HTTP collector on loopback (no network): a run
requested with a ``traceparent`` is continued by dev's request handler, and the attempt
dev's sweep times out is exported in the same trace. Also which variables turn
exporting on (engine/tracing.py, ``export_from_env``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.util._once import Once
from test_local_dev import bare_env, dev_server  # noqa: F401  (bare_env: a fixture)

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.engine import tracing
from whimbrel.testing import wait_until

TRACE_ID, PARENT = 0x5BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7
FLOW = WorkflowDefinition("dev_traced", (ActivityDefinition(
    "W", launcher=LauncherSpec.external(), schedule_to_start_seconds=1),))


class Collector(ThreadingHTTPServer):
    """Spans POSTed to /v1/traces (OTLP/HTTP, protobuf): name, trace id, parent id and
    the service that sent them."""

    spans: list[tuple[str, int, int, str]]


class _Handler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            service = next((a.value.string_value for a in rs.resource.attributes
                            if a.key == "service.name"), "")
            for ss in rs.scope_spans:
                for s in ss.spans:
                    self.server.spans.append((s.name, int.from_bytes(s.trace_id, "big"),
                                              int.from_bytes(s.parent_span_id or b"\0", "big"),
                                              service))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector(("127.0.0.1", 0), _Handler)
    server.spans = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_dev_exports_spans_to_the_otlp_endpoint_of_the_environment(
        bare_env: dict[str, str], tmp_path: Path, ddb_endpoint: str, table_prefix: str,  # noqa: F811
        collector: Collector) -> None:
    endpoint = f"http://127.0.0.1:{collector.server_address[1]}"
    env = {**bare_env, "WHIMBREL_TABLE_PREFIX": table_prefix,
           "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix)
    try:
        wb.create_tables()
        wb.register_workflow(FLOW)
        with dev_server(env, tmp_path / "dev.log", "--endpoint-url", ddb_endpoint,
                        "--no-s3") as banner:
            assert f"tracing: spans exported (otlp to {endpoint})" in banner
            caller = SpanContext(TRACE_ID, PARENT, is_remote=True,
                                 trace_flags=TraceFlags(TraceFlags.SAMPLED))
            with trace.use_span(NonRecordingSpan(caller)):  # the caller's trace
                wb.request_workflow("dev_traced", request_id="dev-traced-1")
            wx = workflow_exec_id_for("dev-traced-1")

            def exported(name: str) -> bool:
                return any(s[0] == name for s in collector.spans)
            # dev's request handler continued the row's trace; its sweep timed out the
            # attempt nobody claimed and exported it in that trace too.
            wait_until(lambda: exported("whimbrel.run dev_traced")
                       and exported("whimbrel.attempt W"), timeout=60,
                       message=f"dev exported no run/attempt spans: {collector.spans}")
        assert wb.get_workflow(wx).activity("W").state.value == "TIMED_OUT"
        mine = [s for s in collector.spans if s[1] == TRACE_ID]
        (root,) = [s for s in mine if s[0] == "whimbrel.run dev_traced"]
        assert root[2] == PARENT and root[3] == "whimbrel-dev"
        assert any(s[0] == "whimbrel.attempt W" for s in mine)
    finally:
        wb.close()
        wb.store.delete_tables()


def _reset_globals() -> None:
    # As tests/integration/test_tracing.py (the SDK's own tests reset it so too).
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]


@pytest.fixture
def no_provider() -> Iterator[None]:
    _reset_globals()
    yield
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        provider.shutdown()
    _reset_globals()


def test_nothing_is_set_up_unless_the_variables_ask(
        no_provider: None, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED",
                 "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(name, raising=False)
    assert tracing.export_from_env("x") is None
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert tracing.export_from_env("x") is None
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert tracing.export_from_env("x") is None
    monkeypatch.delenv("OTEL_SDK_DISABLED")
    provider = tracing.export_from_env("svc")
    assert isinstance(provider, TracerProvider)
    assert provider.resource.attributes["service.name"] == "svc"
    # Set once: a provider already there (the application's, the ADOT layer's) stays.
    assert tracing.export_from_env("other") is None
    assert trace.get_tracer_provider() is provider


def test_the_service_name_of_the_environment_wins_and_odd_exporters_are_named(
        no_provider: None, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console,zipkin")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "orders")
    with caplog.at_level(logging.WARNING, logger="whimbrel.engine.tracing"):
        provider = tracing.export_from_env("whimbrel-dev")
    assert provider is not None and provider.resource.attributes["service.name"] == "orders"
    assert "names 'zipkin'" in caplog.text
