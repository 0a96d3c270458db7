"""How much of a pool's ``per_second`` short work gets (issue 31), on DynamoDB Local with a
clock the probe drives (no timing: the figure is the same on any machine).

    python -m benchmarks.probe_pool_rate [--per-second 10] [--work 0.05] [--sweep 5,60]

A pool with a rate and no slots; far more runs than the rate admits at once; each
admitted attempt ends ``--work`` seconds (of the clock) after it started; a sweep every
``--sweep`` seconds (``whimbrel dev`` sweeps every 5 s, the deployed listener every
minute); this process's pacer looks when they are due. Prints starts per second over
20 s of the clock. As shipped before issue 31 (no pacer of the process's own):
2.00/s at a 5 s sweep and 0.50/s at 60 s for ``per_second=10`` and 50 ms work; with it
10.50/s at both (a burst of 10, then 10/s).
"""

from __future__ import annotations

import argparse
import os

from whimbrel import (
    ActivityDefinition,
    LauncherSpec,
    Transition,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.engine.pools import Pools
from whimbrel.local.dynamodb_local import local_env
from whimbrel.testing import RecordingLauncher, StepClock, dynamodb_local

SECONDS = 20.0


def probe(endpoint: str, per_second: float, work: float, sweep: float) -> float:
    clock, launched = StepClock(), RecordingLauncher()
    wb = Whimbrel(endpoint_url=endpoint, table_prefix=f"rate{int(sweep)}_", clock=clock,
                  launchers={"lambda": launched})
    wb.create_tables()
    try:
        wb.set_pool("p", slots=None, per_second=per_second)
        wb.register_workflow(WorkflowDefinition("w", (ActivityDefinition(
            "a", launcher=LauncherSpec("lambda", {"function": "f"}), pool="p"),)))
        pacer = getattr(wb.engine.feature(Pools).queue, "pacer", None)
        t0 = last_sweep = clock.now
        for _ in range(int(per_second * SECONDS * 1.5)):
            wb.start_workflow("w")
        new = launched.take()
        starts = len(new)
        while clock.now < t0 + SECONDS:
            clock.advance(work)
            for request in new:  # the work ends: each end looks for a token
                wb.transition_activity(request.activity_exec_id, Transition.RUNNING)
                wb.transition_activity(request.activity_exec_id, Transition.COMPLETED)
            if pacer is not None:
                pacer.run_due()  # what its thread does when a look is due
            if clock.now - last_sweep >= sweep - 1e-6:
                wb.sweep()
                last_sweep = clock.now
            new = launched.take()
            starts += len(new)
        return starts / SECONDS
    finally:
        wb.close()
        wb.store.delete_tables()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-second", type=float, default=10.0)
    parser.add_argument("--work", type=float, default=0.05)
    parser.add_argument("--sweep", default="5,60")
    args = parser.parse_args()
    with dynamodb_local() as ddb:
        os.environ.update(local_env(ddb.endpoint_url))
        for sweep in (float(s) for s in args.sweep.split(",")):
            rate = probe(ddb.endpoint_url, args.per_second, args.work, sweep)
            print(f"per_second={args.per_second:g}, {args.work * 1000:.0f} ms work, a sweep "
                  f"every {sweep:g} s: {rate:.2f} starts/s over {SECONDS:.0f} s of clock")


if __name__ == "__main__":
    main()
