"""Tracing: OpenTelemetry spans for a run and its attempts, one trace across processes.

A feature like the others (feature.py): it observes ``begin`` (a new run's item),
``launched``, ``moved`` and ``ended``, and nothing waits for it. Only the OpenTelemetry
*API* is used; with no tracer provider configured (and no trace context coming in) every
hook returns at once and nothing is written (the API's own no-op).

Why spans are built this way (docs/operations.md, "Tracing"): a run lives across many
processes and Lambdas, so no span can stay open for it. Instead

* the starter opens the run's root span ``whimbrel.run <workflow>`` as a child of the
  caller's current context (``start_workflow``, or the ``traceparent`` of a
  ``workflow_request`` row, which the intake continues), ends it when the run's item is
  built, and records its context on the workflow item as W3C ``traceparent``
  (``tracestate`` after a newline when there is one); every activity item copies it;
* whoever makes an attempt's terminal write exports ``whimbrel.attempt <activity>``, a
  child of the root with its start and end taken from the row (created → ended), the
  row's state changes and last heartbeat as events, and its state and error;
* a launch is ``whimbrel.launch <activity>`` (as long as the launcher call);
* the run's terminal write exports ``whimbrel.run.end <workflow>``, a child of the root
  spanning the whole run (created → ended) with its state and error;
* the activity's own process (``run_activity``) opens ``whimbrel.activity <activity>``
  under the root, live, with each heartbeat as an event; the activity's code runs with
  that span current, so its own spans join the run's trace (``ActivityRun.trace_context``
  hands the context to code that runs elsewhere).

Spans are telemetry, not state: an attempt's end seen twice in one process is exported
once; a redelivery handled by another process may export it again (same trace, same
parent, same times).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from whimbrel.contract.records import ActivityRecord, WorkflowRecord
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.engine.feature import Core, Feature

__all__ = ["Span", "Tracing", "activity_span", "context_of", "continued", "current",
           "describe_export", "export_from_env", "flush", "headers", "headers_of",
           "heartbeat_event", "is_on"]

TRACER = "whimbrel"
_PROPAGATOR = TraceContextTextMapPropagator()
_OFF = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
#: Attempt ends this process exported (a replay of the same end exports nothing).
_SEEN = 4096

A = ActivityState
W = WorkflowState
log = logging.getLogger(__name__)


# -- trace context on the rows ------------------------------------------------------------

def is_on() -> bool:
    """Whether there is anything to trace: a tracer provider is configured, or the caller
    runs inside a trace (its context is carried even without one)."""
    return not isinstance(trace.get_tracer_provider(), _OFF) \
        or trace.get_current_span().get_span_context().is_valid


def _encode(carrier: Mapping[str, str]) -> str | None:
    parent = carrier.get("traceparent")
    if not parent:
        return None
    state = carrier.get("tracestate")
    return f"{parent}\n{state}" if state else parent


def current() -> str | None:
    """The caller's current trace context as a row attribute (None: not in a trace)."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return _encode(carrier)


def headers(value: str | None) -> dict[str, str]:
    """A row's ``traceparent`` attribute as W3C headers (``traceparent``, ``tracestate``)."""
    if not value:
        return {}
    parent, _, state = value.partition("\n")
    return {"traceparent": parent.strip(), **({"tracestate": state.strip()} if state else {})}


def headers_of(span: Span) -> dict[str, str]:
    """W3C headers naming ``span`` as the parent."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, trace.set_span_in_context(span))
    return carrier


def context_of(value: str | None) -> otel_context.Context | None:
    """The trace context a row carries (None: none, or not valid W3C)."""
    if not value:
        return None
    ctx = _PROPAGATOR.extract(headers(value))
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


@contextmanager
def continued(value: str | None) -> Iterator[None]:
    """Run the block in the trace context a row carries (as is, when it carries none)."""
    ctx = context_of(value)
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def _ns(epoch: float | None) -> int | None:
    return None if epoch is None else int(epoch * 1e9)


def _tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER)


def _attempt_attributes(item: ActivityRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "whimbrel.workflow_exec_id": item.workflow_exec_id,
        "whimbrel.workflow_name": item.workflow_name,
        "whimbrel.activity_exec_id": item.activity_exec_id,
        "whimbrel.activity_name": item.activity_name,
        "whimbrel.attempt": item.attempt,
    }
    if item.state is not None:
        out["whimbrel.state"] = item.state.value
    if item.error_type:
        out["whimbrel.error_type"] = item.error_type
    return out


@contextmanager
def activity_span(item: ActivityRecord) -> Iterator[Span | None]:
    """The live span of an attempt's own process (``run_activity``), current in the
    block; None when there is nothing to trace."""
    ctx = context_of(item.traceparent)
    if ctx is None and not is_on():
        yield None
        return
    with _tracer().start_as_current_span(
            f"whimbrel.activity {item.activity_name}", context=ctx, kind=SpanKind.CONSUMER,
            attributes=_attempt_attributes(item), record_exception=False,
            set_status_on_exception=True) as span:
        yield span


def heartbeat_event(span: Span | None) -> None:
    if span is not None and span.is_recording():
        span.add_event("heartbeat")


# -- exporting from the environment ----------------------------------------------------------

#: The OTLP exporter package per ``OTEL_EXPORTER_OTLP_PROTOCOL`` (the ``otel`` extra
#: brings the http/protobuf one).
_OTLP = {"http/protobuf": ("opentelemetry.exporter.otlp.proto.http.trace_exporter",
                           "opentelemetry-exporter-otlp-proto-http"),
         "grpc": ("opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
                  "opentelemetry-exporter-otlp-proto-grpc")}
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def export_from_env(service: str) -> Any:
    """A tracer provider exporting spans as the standard OpenTelemetry variables say,
    for processes that do not configure one themselves (``whimbrel dev``, the
    Lambdas); its ``SDK`` TracerProvider, or None when nothing is configured.

    Only when the user asked: ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``, ``none``;
    comma-separated) or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``…_TRACES_
    ENDPOINT``: ``otlp``) is set, ``OTEL_SDK_DISABLED`` is not ``true``, and no provider
    is set yet (an application's own, or the ADOT layer's, is left alone). OTLP goes over
    http/protobuf unless ``OTEL_EXPORTER_OTLP_PROTOCOL`` says ``grpc``; the exporter
    reads its own variables (endpoint, headers, timeout), the batch processor
    ``OTEL_BSP_*``; ``service.name`` is ``service`` unless ``OTEL_SERVICE_NAME`` (or
    ``OTEL_RESOURCE_ATTRIBUTES``) names one. A missing SDK or exporter package is
    logged (what to install) and nothing is exported: tracing never stops a process.
    """
    env = os.environ
    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",")
             if n.strip()]
    if not names and any(env.get(v) for v in _ENDPOINTS):
        names = ["otlp"]
    names = [n for n in names if n != "none"]
    if not names or env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" \
            or not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        log.warning("tracing: OTEL_TRACES_EXPORTER / OTEL_EXPORTER_OTLP_ENDPOINT is set but "
                    "the OpenTelemetry SDK is not installed: pip install 'whimbrel[otel]'")
        return None
    named = env.get("OTEL_SERVICE_NAME") or "service.name=" in env.get(
        "OTEL_RESOURCE_ATTRIBUTES", "")
    provider = TracerProvider(resource=Resource.create({} if named else {
        "service.name": service}))
    for name in names:
        exporter = ConsoleSpanExporter() if name == "console" else \
            _otlp_exporter() if name == "otlp" else None
        if exporter is None:
            if name not in ("console", "otlp"):
                log.warning("tracing: OTEL_TRACES_EXPORTER names %r; whimbrel exports to "
                            "'otlp' or 'console' (ignored)", name)
            continue
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider


def _otlp_exporter() -> Any:
    env = os.environ
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()
    module, package = _OTLP.get(protocol, _OTLP["http/protobuf"])
    try:
        return __import__(module, fromlist=["OTLPSpanExporter"]).OTLPSpanExporter()
    except ImportError:
        log.warning("tracing: OTLP over %s needs the package %s (pip install %s; the "
                    "'whimbrel[otel]' extra brings the http/protobuf one)", protocol,
                    package, package)
        return None


def describe_export() -> str:
    """Where ``export_from_env`` sends spans, as the variables say (for a banner)."""
    env = os.environ
    names = env.get("OTEL_TRACES_EXPORTER") or "otlp"
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318"
    return names.replace("otlp", f"otlp to {endpoint}")


def flush(timeout_millis: int = 5000) -> None:
    """Export what the provider holds now: a Lambda is frozen once its handler returns,
    so a batch left for later may never leave."""
    provider = trace.get_tracer_provider()
    force = getattr(provider, "force_flush", None)
    if callable(force):
        force(timeout_millis)


# -- the feature ---------------------------------------------------------------------------

class Tracing(Feature):
    """Spans for a run and its attempts (docs/operations.md, "Tracing")."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self._lock = threading.Lock()
        self._exported: OrderedDict[str, None] = OrderedDict()

    def begin(self, record: WorkflowRecord) -> WorkflowRecord:
        if not is_on():
            return record
        now = record.created_epoch
        span = _tracer().start_span(
            f"whimbrel.run {record.workflow_name}", kind=SpanKind.INTERNAL,
            start_time=_ns(now), attributes={
                "whimbrel.workflow_exec_id": record.workflow_exec_id,
                "whimbrel.workflow_name": record.workflow_name,
                "whimbrel.workflow_version": record.version,
                "whimbrel.workflow_request_id": record.workflow_request_id})
        try:
            carrier: dict[str, str] = {}
            _PROPAGATOR.inject(carrier, trace.set_span_in_context(span))
            value = _encode(carrier)
        finally:
            span.end()
        return record if value is None else _with_trace(record, value)

    def launched(self, item: ActivityRecord) -> None:
        ctx = context_of(item.traceparent)
        if ctx is None:
            return
        queued = next((h.at for h in reversed(item.history)
                       if h.state in (A.QUEUED.value, A.RUNNING.value)), None)
        span = _tracer().start_span(f"whimbrel.launch {item.activity_name}", context=ctx,
                                    kind=SpanKind.PRODUCER, start_time=_ns(queued),
                                    attributes=_attempt_attributes(item))
        span.end()

    def moved(self, item: ActivityRecord) -> None:
        if item.state is None or not item.state.is_terminal:
            return
        ctx = context_of(item.traceparent)
        if ctx is None or self._seen(item):
            return
        end = item.ended_epoch or item.updated_epoch or time.time()
        start = item.created_epoch or (item.history[0].at if item.history else end)
        span = _tracer().start_span(f"whimbrel.attempt {item.activity_name}", context=ctx,
                                    kind=SpanKind.INTERNAL, start_time=_ns(start),
                                    attributes=_attempt_attributes(item))
        events = [(c.at, f"state {c.state}", c.by or "") for c in item.history]
        if item.heartbeat_epoch is not None:
            events.append((item.heartbeat_epoch, "last heartbeat", ""))
        for at, name, by in sorted(events, key=lambda e: e[0]):
            span.add_event(name, {"whimbrel.by": by} if by else None, timestamp=_ns(at))
        if item.state is not A.COMPLETED:
            span.set_status(Status(StatusCode.ERROR, (item.error or item.state.value)[:500]))
        span.end(end_time=_ns(end))

    def ended(self, wf: WorkflowRecord) -> None:
        ctx = context_of(wf.traceparent)
        if ctx is None:
            return
        end = wf.ended_epoch or wf.updated_epoch
        span = _tracer().start_span(
            f"whimbrel.run.end {wf.workflow_name}", context=ctx, kind=SpanKind.INTERNAL,
            start_time=_ns(wf.created_epoch), attributes={
                "whimbrel.workflow_exec_id": wf.workflow_exec_id,
                "whimbrel.workflow_name": wf.workflow_name,
                "whimbrel.state": wf.state.value})
        if wf.state is not W.COMPLETED:
            span.set_status(Status(StatusCode.ERROR, (wf.error or wf.state.value)[:500]))
        span.end(end_time=_ns(end))

    def _seen(self, item: ActivityRecord) -> bool:
        key = f"{item.activity_exec_id}#{_value(item.state)}"
        with self._lock:
            if key in self._exported:
                return True
            self._exported[key] = None
            while len(self._exported) > _SEEN:
                self._exported.popitem(last=False)
        return False


def _with_trace(record: WorkflowRecord, value: str) -> WorkflowRecord:
    return replace(record, traceparent=value)


def _value(state: ActivityState | None) -> str:
    return state.value if state is not None else ""

