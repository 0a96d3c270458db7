"""What a cancel costs: a code run's (its clean-up decision included) beside a DAG
run's, by AWS billing rules (every request through :class:`benchmarks.billing.Meter`).

    python -m benchmarks.probe_cancel_cost [--steps 10] [--repeats 3]

Starts its own DynamoDB Local. Each run completes ``steps`` no-op steps, then waits (a
code run on a signal; a DAG run on an external activity nobody claims) and is cancelled
by the process that started it. Prints WRU and RRU of the cancel alone (from the
``cancel_workflow`` call until the run is CANCELLED and ``wait`` read it, without the
client's idle claim polls; the median of ``repeats`` runs after a warm-up): for a DAG,
a code run with no clean-up, and a code run whose ``except Cancelled`` runs one python
step.
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any

from benchmarks.billing import Meter, summarize
from benchmarks.shapes import NOOP
from whimbrel import (
    ActivityDefinition,
    ActivityRun,
    Cancelled,
    Whimbrel,
    WorkflowContext,
    WorkflowDefinition,
    workflow,
)
from whimbrel.testing import SharedDynamoDBLocal, fresh_table_prefix, wait_until


def noop(run: ActivityRun) -> Any:
    return None


@workflow("cancel_plain")
def cancel_plain(ctx: WorkflowContext, input: Any) -> Any:
    for _ in range(input["steps"]):
        ctx.step(noop)
    return ctx.wait_signal("go")


@workflow("cancel_cleanup")
def cancel_cleanup(ctx: WorkflowContext, input: Any) -> Any:
    for _ in range(input["steps"]):
        ctx.step(noop)
    try:
        return ctx.wait_signal("go")
    except Cancelled:
        ctx.step(noop)
        raise


def dag(steps: int) -> WorkflowDefinition:
    acts = [ActivityDefinition(f"s{i}", launcher=NOOP,
                               depends_on=[f"s{i - 1}"] if i else [])
            for i in range(steps)]
    acts.append(ActivityDefinition("wait", depends_on=[f"s{steps - 1}"]))  # external
    return WorkflowDefinition("cancel_dag", acts)


def measure(endpoint: str, kind: str, steps: int,
            repeats: int) -> tuple[list[tuple[float, float]], dict[str, Any]]:
    prefix = fresh_table_prefix()
    meter = Meter(endpoint, prefix)
    out: list[tuple[float, float]] = []
    got: dict[str, Any] = {}
    try:
        with Whimbrel(endpoint_url=meter.url, table_prefix=prefix) as wb:
            wb.create_tables()
            wb.register_workflow(cancel_plain)
            wb.register_workflow(cancel_cleanup)
            wb.register_workflow(dag(steps))
            for i in range(repeats + 1):
                if kind == "dag":
                    wx = wb.start_workflow("cancel_dag")
                    last = f"{wx}:wait:1"
                else:
                    wx = wb.start_workflow(kind, {"steps": steps})
                    last = f"{wx}:signal-go#1:1"
                wait_until(lambda: (a := wb.store.get_activity(last)) is not None  # noqa: B023
                           and a.state is not None and a.state.value == "READY",
                           timeout=120)
                meter.settle()
                meter.drain()
                wb.cancel_workflow(wx)
                run = wb.wait(wx, timeout=120)
                assert run.state.value == "CANCELLED", run
                meter.settle()
                # Without the client's idle claim polls (its worker loop reads the
                # claimable index now and then, whatever the run does).
                got = summarize([r for r in meter.drain() if ".claimable" not in r.label])
                if i:  # the first run warms the process up
                    out.append((got["wru_total"], got["rru_total"]))
            wb.store.delete_tables()
    finally:
        meter.close()
    return out, got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for name, value in {"AWS_ACCESS_KEY_ID": "whimbrel", "AWS_SECRET_ACCESS_KEY": "whimbrel",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        os.environ.setdefault(name, value)  # DynamoDB Local takes any
    with SharedDynamoDBLocal() as shared:
        endpoint = shared.endpoint_url()
        for kind in ("dag", "cancel_plain", "cancel_cleanup"):
            runs, last = measure(endpoint, kind, args.steps, args.repeats)
            wru = statistics.median(r[0] for r in runs)
            rru = statistics.median(r[1] for r in runs)
            print(f"{kind} after {args.steps} steps: the cancel costs {wru:.1f} WRU, "
                  f"{rru:.1f} RRU (wait included, run item included)")
            for label, row in sorted(last["labels"].items(), key=lambda kv: -kv[1]["rru"]):
                print(f"  {label:70s} calls {row['calls']:3.0f}  WRU {row['wru']:5.1f}  "
                      f"RRU {row['rru']:5.1f}")


if __name__ == "__main__":
    main()
