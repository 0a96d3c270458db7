"""Tracing's cost on the Full Logic chain (issue 21 item 7): a chain of in-process
activities run N times with no tracer provider, then with the SDK exporting to memory.

    python -m benchmarks.probe_tracing --endpoint http://127.0.0.1:8000 [--runs 20]

Prints the median wall time of one run of each; the first is the cost users pay by
default (the API's no-op), the second what a configured SDK adds.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.engine.hooks import Hooks
from whimbrel.engine.tracing import Tracing

STEP = LauncherSpec.python("benchmarks.probe_tracing:step")


def step(run: object) -> int:
    return 1


def chain(n: int) -> WorkflowDefinition:
    return WorkflowDefinition("traced_chain", tuple(
        ActivityDefinition(f"s{i}", (f"s{i - 1}",) if i else (), launcher=STEP)
        for i in range(n)))


def timed(wb: Whimbrel, runs: int) -> float:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        wb.wait(wb.start_workflow("traced_chain"), timeout=60)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--length", type=int, default=5)
    args = ap.parse_args()
    wb = Whimbrel(endpoint_url=args.endpoint, table_prefix=f"bt{uuid.uuid4().hex[:6]}_")
    wb.create_tables()
    try:
        wb.register_workflow(chain(args.length))
        timed(wb, 3)  # warm up: definition cache, connections
        engine = wb.engine
        hooks = engine.hooks
        engine.hooks = Hooks([f for f in hooks.features if not isinstance(f, Tracing)])
        without = timed(wb, args.runs)
        engine.hooks = hooks
        off = timed(wb, args.runs)
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        on = timed(wb, args.runs)
        spans = len(exporter.get_finished_spans()) / args.runs
        print(f"{args.length}-activity chain, median of {args.runs} runs: "
              f"without the feature {without * 1000:.1f} ms, "
              f"no provider {off * 1000:.1f} ms ({(off - without) / without * 100:+.1f}%), "
              f"SDK in memory {on * 1000:.1f} ms "
              f"({(on - off) / off * 100:+.1f}%), {spans:.0f} spans a run")
    finally:
        wb.store.delete_tables()
        wb.close()


if __name__ == "__main__":
    main()
