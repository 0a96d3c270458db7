"""DBOS side of the peer benchmark (``bench_peer``), run in a child process.

DBOS is a process-wide singleton (``DBOS(...)``, ``DBOS.launch()``, ``DBOS.destroy()``),
so ``bench_peer`` starts this module with ``python -m benchmarks._dbos_peer`` and reads
one JSON object from the last line of its stdout. Every timing is taken in here.

    python -m benchmarks._dbos_peer --chain 50 --fanout 100 --repeats 5 --poll 0.01

* chain: one workflow calling ``--chain`` no-op ``@DBOS.step``s one after another;
* fan-out: one step, then ``--fanout`` no-op steps enqueued on a DBOS ``Queue`` (DBOS's
  way of running steps in parallel; each is wrapped in its own child workflow) and
  awaited, then one final step: 1 -> N -> 1.

The system database is SQLite in a fresh temporary directory; the queue is registered
with ``polling_interval_sec = --poll`` and no concurrency limit, and the fan-out awaits
each handle with ``get_result(polling_interval_sec = --poll)`` (DBOS's default is 1 s).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._dbos_peer")
    parser.add_argument("--chain", type=int, default=50)
    parser.add_argument("--fanout", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--poll", type=float, default=0.01, help="queue polling seconds")
    args = parser.parse_args(argv)

    from dbos import DBOS  # imported here: the parent process never loads DBOS

    tmp = Path(tempfile.mkdtemp(prefix="whimbrel-bench-dbos-"))
    db_url = f"sqlite:///{tmp / 'dbos_system.sqlite'}"
    DBOS(config={"name": "whimbrel_bench_peer", "system_database_url": db_url,
                 "log_level": "WARNING"})
    queue_name = "whimbrel_bench_fanout"

    @DBOS.step()
    def noop(i: int) -> int:
        return i

    @DBOS.workflow()
    def chain(n: int) -> int:
        for i in range(n):
            noop(i)
        return n

    @DBOS.workflow()
    def fanout(n: int) -> int:
        noop(-1)
        queue = DBOS.retrieve_queue(queue_name)
        assert queue is not None
        handles = [queue.enqueue(noop, i) for i in range(n)]
        # get_result polls the system database (1 s by default): poll at the queue's rate.
        total = sum(h.get_result(polling_interval_sec=args.poll) for h in handles)
        noop(-2)
        return total

    try:
        DBOS.launch()
        DBOS.register_queue(queue_name, polling_interval_sec=args.poll)

        def timed(fn: Any, n: int) -> float:
            t0 = time.perf_counter()
            fn(n)
            return (time.perf_counter() - t0) * 1000.0

        for _ in range(args.warmup):
            timed(chain, args.chain)
            timed(fanout, args.fanout)
        chain_ms = [timed(chain, args.chain) for _ in range(args.repeats)]
        fanout_ms = [timed(fanout, args.fanout) for _ in range(args.repeats)]
    finally:
        DBOS.destroy()
        shutil.rmtree(tmp, ignore_errors=True)

    result: dict[str, Any] = {
        "dbos_version": md.version("dbos"),
        "config": {
            "system_database": "SQLite file in a fresh temp dir",
            "queue_polling_interval_sec": args.poll,
            "get_result_polling_interval_sec": args.poll,
            "queue_concurrency": "unlimited (worker_concurrency=None, global_concurrency=None)",
            "executor_threads": "DBOS default (unbounded)",
            "log_level": "WARNING",
        },
        "chain": {"steps": args.chain, "wall_ms": chain_ms},
        "fanout": {"steps": args.fanout + 2, "wall_ms": fanout_ms},
    }
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
