"""What handing a code run's decisions to a worker costs in latency (docs/architecture.md,
"Code runs where the code is"): a run of ``--steps`` external steps, each completed by a
client; milliseconds per step when that client is the worker for the workflow (it
decides in the write that ends the step) and when it is not (it leaves each decision,
and the registering client's background claim loop takes it).

    python -m benchmarks.code_handoff [--steps 30] [--endpoint URL]

Starts DynamoDB Local (or uses ``--endpoint``). Each step is completed as soon as it is
READY (polled every 5 ms, the same in both modes).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from whimbrel import ActivityState, Whimbrel, WorkflowContext, WorkflowState, workflow
from whimbrel.local.dynamodb_install import find_dynamodb_local, install_dynamodb_local
from whimbrel.local.dynamodb_local import SHORT_LIVED_JVM, DynamoDBLocal, local_env
from whimbrel.testing import fresh_table_prefix


@workflow("handoff_ticks")
def ticks(ctx: WorkflowContext, input: dict[str, Any]) -> int:
    for i in range(input["steps"]):
        ctx.step("tick", {"i": i})
    return int(input["steps"])


def _drive(by: Whimbrel, wx: str, steps: int) -> float:
    """Complete each step as it becomes READY; seconds from the first READY to the end."""
    start = None
    for k in range(1, steps + 1):
        aeid = f"{wx}:tick#{k}:1"
        deadline = time.monotonic() + 60
        while (row := by.store.get_activity(aeid)) is None or row.state is not \
                ActivityState.READY:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{aeid} never READY")
            time.sleep(0.005)
        start = start or time.monotonic()
        by.transition_activity(aeid, "RUNNING")
        by.transition_activity(aeid, "COMPLETED")
    assert start is not None
    run = by.wait(wx, timeout=60)
    assert run.state is WorkflowState.COMPLETED, run
    return time.monotonic() - start


def measure(endpoint: str, steps: int) -> dict[str, float]:
    prefix = fresh_table_prefix()
    owner = Whimbrel(endpoint_url=endpoint, table_prefix=prefix)
    owner.create_tables()
    other = Whimbrel(endpoint_url=endpoint, table_prefix=prefix)
    out: dict[str, float] = {}
    try:
        owner.register_workflow(ticks)
        for mode, by in (("decided where the step ends", owner),
                         ("left for the worker", other)):
            wx = owner.start_workflow("handoff_ticks", {"steps": steps})
            out[mode] = _drive(by, wx, steps) / steps * 1000
    finally:
        other.close()
        owner.store.delete_tables()
        owner.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", default=None)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    if args.endpoint:
        got = measure(args.endpoint, args.steps)
    else:
        with DynamoDBLocal(directory=install_dynamodb_local(find_dynamodb_local()),
                           java_options=SHORT_LIVED_JVM) as ddb:
            os.environ.update(local_env(ddb.endpoint_url))
            got = measure(ddb.endpoint_url, args.steps)
    for mode, ms in got.items():
        print(f"{args.steps} steps, {mode}: {ms:.1f} ms/step")


if __name__ == "__main__":
    main()
