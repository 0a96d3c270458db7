"""A rate-limited crawl: a map over URLs whose items share a pool with `per_second`.

    cd examples/rate_limited_crawl
    python run.py

It creates the pool `example-api` (4 slots, 2 starts per second), registers crawl.yaml,
starts a crawl of eight URLs and runs the sweep itself while it waits (the heartbeat
Lambda, or `whimbrel dev`'s sweeper, does that when deployed: it lets a rate's waiting
attempts in when the next token is due). It prints when each fetch started: two at
once (the burst: one second's worth), then two a second as the bucket refills.

With the CLI: a fetch let in by the pool's pacer runs in the process that lets it in —
the sweeper of `whimbrel dev` — so start dev where the activities can be imported, and
the submit too (PYTHONPATH=. so the python launcher finds them):

    PYTHONPATH=. whimbrel dev                      # terminal 1, in this directory
    whimbrel pools set example-api --slots 4 --per-second 2
    whimbrel definitions register crawl.yaml
    PYTHONPATH=. whimbrel submit crawl --wait \\
        --input '{"urls": ["https://api.example/1", "https://api.example/2"]}'
    whimbrel pools get example-api
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from whimbrel import Whimbrel, WorkflowDefinition, WorkflowExec

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # so the python launcher can import crawl_activities

URLS = [f"https://api.example/items/{i}" for i in range(8)]


def run(wb: Whimbrel, urls: list[str] = URLS, *,
        tick: Callable[[], object] = lambda: time.sleep(0.1),
        timeout_ticks: int = 2000) -> WorkflowExec:
    wb.set_pool("example-api", slots=4, per_second=2)
    wb.register_workflow(WorkflowDefinition.from_file(HERE / "crawl.yaml"))
    wx = wb.start_workflow("crawl", {"urls": urls})
    for _ in range(timeout_ticks):
        if wb.engine.reads.workflow(wx).state.is_terminal:
            break
        wb.sweep()  # a due pacer look lets the next fetches in
        tick()
    wf = wb.get_workflow(wx)
    first = min(a.started_epoch or 0.0 for a in wf.items)
    for item in sorted(wf.items, key=lambda a: a.started_epoch or 0.0):
        print(f"{item.activity_name:9} started at +{(item.started_epoch or first) - first:4.1f} s"
              f"  {item.output}")
    print(f"{wf.state.value}: {wf.output.get('summarise')}")
    return wf


def main() -> int:
    with Whimbrel.from_env() as wb:
        wb.create_tables()
        return 0 if run(wb).state.value == "COMPLETED" else 1


if __name__ == "__main__":
    raise SystemExit(main())
