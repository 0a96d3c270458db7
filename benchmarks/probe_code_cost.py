"""Capacity per step of a code workflow's in-process chain, beside the DAG chain, by AWS
billing rules (every request through :class:`benchmarks.billing.Meter`).

    python -m benchmarks.probe_code_cost [--steps 20] [--repeats 3] [--always-replay]

Starts its own DynamoDB Local. Prints WRU and RRU per step (the median of ``repeats``
runs after a warm-up) and, for the last code run, the units by request label.
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any

from benchmarks.billing import Meter, summarize
from benchmarks.code_shapes import code_chain
from benchmarks.shapes import NOOP, chain
from whimbrel import Whimbrel
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.testing import SharedDynamoDBLocal, fresh_table_prefix


def measure(endpoint: str, kind: str, steps: int, repeats: int,
            always_replay: bool) -> tuple[list[tuple[float, float]], dict[str, Any]]:
    prefix = fresh_table_prefix()
    meter = Meter(endpoint, prefix)
    per_step: list[tuple[float, float]] = []
    last: dict[str, Any] = {}
    try:
        with Whimbrel(endpoint_url=meter.url, table_prefix=prefix) as wb:
            wb.create_tables()
            wb.engine.feature(CodeRuns).always_replay = always_replay
            if kind == "code":
                wb.register_workflow(code_chain)
            else:
                wb.register_workflow(chain(steps).definition("dag_chain", NOOP))
            for i in range(repeats + 1):
                meter.settle()
                meter.drain()
                wx = wb.start_workflow("code_chain", {"steps": steps}) if kind == "code" \
                    else wb.start_workflow("dag_chain")
                run = wb.wait(wx, timeout=300)
                assert run.state.value == "COMPLETED", run
                meter.settle()
                last = summarize(meter.drain())
                if i:  # the first run warms the process up
                    per_step.append((last["wru_total"] / steps, last["rru_total"] / steps))
            wb.store.delete_tables()
    finally:
        meter.close()
    return per_step, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--always-replay", action="store_true")
    args = parser.parse_args()
    for name, value in {"AWS_ACCESS_KEY_ID": "whimbrel", "AWS_SECRET_ACCESS_KEY": "whimbrel",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        os.environ.setdefault(name, value)  # DynamoDB Local takes any
    with SharedDynamoDBLocal() as shared:
        endpoint = shared.endpoint_url()
        for kind in ("dag", "code"):
            runs, last = measure(endpoint, kind, args.steps, args.repeats, args.always_replay)
            wru = statistics.median(r[0] for r in runs)
            rru = statistics.median(r[1] for r in runs)
            print(f"{kind} chain of {args.steps}: {wru:.2f} WRU/step, {rru:.2f} RRU/step "
                  "(includes the run's own writes: request row, run item)")
            if kind == "code":
                for label, row in sorted(last["labels"].items(), key=lambda kv: -kv[1]["wru"]):
                    print(f"  {label:70s} calls {row['calls']:5.0f}  WRU {row['wru']:6.1f}  "
                          f"RRU {row['rru']:6.1f}")


if __name__ == "__main__":
    main()
