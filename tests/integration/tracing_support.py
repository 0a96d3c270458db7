"""What the tracing tests share: resetting OpenTelemetry's once-per-process provider."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.util._once import Once


def reset_trace_globals() -> None:
    # OpenTelemetry's global provider may be set once per process; its own tests reset it
    # like this (opentelemetry.test.globals_test.reset_trace_globals).
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]
