"""examples/rate_limited_crawl runs as documented (issue 22): a map whose items share a
pool of 4 slots and 2 starts per second. The clock is driven (each tick half a second,
no sleeping): the fetches start two at once (the burst), then as the bucket refills, two
a second, and the crawl completes with every page."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from whimbrel import Whimbrel, WorkflowState
from whimbrel.testing import StepClock, wait_until

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rate_limited_crawl"
CLOCK = StepClock


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_crawl", EXAMPLE / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_rate_limited_crawl_example(wb: Whimbrel, clock: StepClock) -> None:
    example = _example()

    def tick() -> None:
        # The fetches run on this client's threads: let the launched ones finish (a
        # poll, not a sleep), then half a second passes.
        wait_until(lambda: not any(
            a.state.value in ("QUEUED", "RUNNING") for a in wb.get_workflow(
                wb.list_workflows(name="crawl").items[0].workflow_exec_id).items),
            timeout=30)
        clock.advance(0.5)

    wf = example.run(wb, tick=tick, timeout_ticks=100)
    assert wf.state is WorkflowState.COMPLETED
    assert wf.output["summarise"]["pages"] == len(example.URLS)
    starts = sorted(float(a.started_epoch) for a in wf.items)
    assert len(starts) == len(example.URLS)
    first = starts[0]
    assert sum(s == first for s in starts) == 2  # the burst: one second's worth
    # A token bucket of 2 tokens refilled at 2 per second: between any two starts,
    # at most the burst plus what refilled meanwhile.
    for i, s in enumerate(starts):
        for j in range(i + 1, len(starts)):
            assert j - i + 1 <= 2 + 2 * (starts[j] - s) + 1e-6, starts
    assert starts[-1] - first >= (len(starts) - 2) / 2 - 0.01  # paced, not bunched
    assert wb.get_pool("example-api").in_use == 0
