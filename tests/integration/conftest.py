from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from whimbrel import Whimbrel
from whimbrel.testing import RecordingLauncher, StepClock


class ManualClock:
    """Real time plus an offset the test can move forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture
def clock(request: pytest.FixtureRequest) -> ManualClock | StepClock:
    """Real time plus an offset; a module that sets ``CLOCK = StepClock`` gets a clock
    that stands still until the test moves it (deadlines driven through ``sweep``)."""
    factory: type[ManualClock] | type[StepClock] = getattr(request.module, "CLOCK",
                                                           ManualClock)
    return factory()


@pytest.fixture
def launched() -> RecordingLauncher:
    """The ``lambda`` launcher of ``wb``: records launches and starts nothing."""
    return RecordingLauncher()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module that sets ``TWIN = True`` runs each test using ``wb`` twice: on the
    in-memory twin (marked ``twin``: the unit tier) and on DynamoDB Local."""
    if "store_kind" in metafunc.fixturenames and getattr(metafunc.module, "TWIN", False):
        metafunc.parametrize("store_kind", [pytest.param("memory", marks=pytest.mark.twin),
                                            "dynamodb_local"], indirect=True)


@pytest.fixture
def store_kind(request: pytest.FixtureRequest) -> str:
    """Where ``wb`` keeps its tables: ``dynamodb_local``, or ``memory`` (the twin) when the
    module asks for both (``TWIN``) or ``WHIMBREL_TEST_STORE=memory`` is set."""
    default = ("memory" if os.environ.get("WHIMBREL_TEST_STORE") == "memory"
               else "dynamodb_local")
    return str(getattr(request, "param", default))


@pytest.fixture
def wb(request: pytest.FixtureRequest, store_kind: str, table_prefix: str,
       clock: ManualClock | StepClock, launched: RecordingLauncher) -> Iterator[Whimbrel]:
    """A client on DynamoDB Local, or on the in-memory twin (``Whimbrel.in_memory``) when
    ``store_kind`` says so."""
    if store_kind == "memory":
        client = Whimbrel.in_memory(clock=clock, table_prefix=table_prefix,
                                    launchers={"lambda": launched})
    else:
        client = Whimbrel(endpoint_url=request.getfixturevalue("ddb_endpoint"),
                          table_prefix=table_prefix, clock=clock,
                          launchers={"lambda": launched})
        client.create_tables()
    yield client
    client.close()
    client.store.delete_tables()  # keep the shared server small and fast



@pytest.fixture
def spans() -> Iterator[Any]:
    """An in-memory span exporter behind a fresh global tracer provider (the tracing
    tests'), reset after the test."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from tracing_support import reset_trace_globals

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reset_trace_globals()
    trace.set_tracer_provider(provider)
    yield exporter
    provider.shutdown()
    reset_trace_globals()


@pytest.fixture
def gate() -> Iterator[None]:
    """``wb_test_activities.gated`` activities run until the test opens ``GATE`` (and
    their count starts from zero)."""
    import wb_test_activities as acts

    acts.GATE.clear()
    acts.GATED.update(now=0, most=0)
    yield
    acts.GATE.set()  # never leave a thread waiting, even when the test failed
