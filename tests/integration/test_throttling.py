"""Under DynamoDB's throttling (the benchmarks' billing proxy in its throttling mode:
AWS's per-key and per-table limits divided by ``SCALE``, index back-pressure included),
a burst of runs and a wide map complete: nothing lost, no run stuck, no attempt
launched twice, and the store's back-off visible in its meter (issue 19, item 2).

What makes it hold (docs/reliability.md, "Throttling"): the store retries a throttled
call with back-off; past its attempts, a worker keeps retrying an attempt's end write
(``worker/run.py``: a retry that finds its own end already written runs the follow-ups
again), and a follow-up that still fails moves its run's reconcile visit to now
(``engine/flow.py`` ``visit_soon``), which re-derives what is missing (a map lane's next
item). The test drives the sweep itself, as the deployed heartbeat listener would.

Sizes: a 200-run burst and a 100-item map at AWS's limits / 400 by default (with every
key spread, the tables' quotas — 100 WCU/s each at this scale — are what the burst
runs into), the store giving up after 2 tries;
``WHIMBREL_THROTTLE_RUNS`` / ``_ITEMS`` / ``_SCALE`` / ``_TRIES`` / ``_PATIENCE`` set
others (the issue's target, a 2,000-item map, was measured with them:
docs/benchmarks.md, Scale).
"""

from __future__ import annotations

import os
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config

from whimbrel import ActivityDefinition as Act
from whimbrel import LauncherSpec, Whimbrel, WorkflowDefinition, WorkflowState
from whimbrel.contract.errors import StoreError
from whimbrel.engine import RECONCILE_GRACE_SECONDS
from whimbrel.engine.ports import Launcher, LaunchRequest, runs_in_process
from whimbrel.launch.python import PythonLauncher
from whimbrel.testing import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ is not installed
from benchmarks.billing import Meter
from benchmarks.throttle import Throttle

#: AWS's limits / 400: 2.5 WCU/s and 7.5 RCU/s per key, 100 WCU/s per table (a loaded
#: 2-core machine's DynamoDB Local outruns that, so the throttling always bites; at /100
#: it no longer did once a map's items left their run's one partition).
SCALE = float(os.environ.get("WHIMBREL_THROTTLE_SCALE", "400"))
RUNS = int(os.environ.get("WHIMBREL_THROTTLE_RUNS", "200"))
#: ~3 WRU an item, over 16 partitions of map_item.
ITEMS = int(os.environ.get("WHIMBREL_THROTTLE_ITEMS", "100"))
#: The store's tries per call (botocore's ``total_max_attempts``; Whimbrel's default
#: is 5): few, so that it gives up often and what follows is exercised too. 0: the
#: store's default.
TRIES = int(os.environ.get("WHIMBREL_THROTTLE_TRIES", "2"))
#: Seconds for everything to complete (a loaded 2-core machine; ~30 s when quiet).
PATIENCE = float(os.environ.get("WHIMBREL_THROTTLE_PATIENCE", "240"))
NOOP = LauncherSpec.python("wb_data_activities:noop")
#: Polls (0.5 s apart) that end no run before the test moves its clock past the grace.
STILL_POLLS = 6


class CountingLauncher:
    """The client's own ``python`` launcher, each launch counted by attempt id."""

    def __init__(self, inner: Launcher) -> None:
        self.inner = inner
        self.in_process = runs_in_process(inner)
        self.launches: Counter[str] = Counter()
        self._lock = threading.Lock()

    def launch(self, request: LaunchRequest) -> None:
        with self._lock:
            self.launches[request.activity_exec_id] += 1
        self.inner.launch(request)


@pytest.mark.slow
def test_a_burst_of_runs_and_a_wide_map_complete_exactly_once_under_throttling(
        ddb_endpoint: str, table_prefix: str, clock: Any) -> None:
    """``clock``: real time plus an offset the test moves (tests/integration/conftest)."""
    throttle = Throttle(scale=SCALE)
    meter = Meter(ddb_endpoint, table_prefix, throttle)
    try:
        config = Config(retries={"mode": "standard", "total_max_attempts": TRIES}) \
            if TRIES else None
        with Whimbrel(meter.url, table_prefix, max_workers=16, clock=clock,
                      botocore_config=config) as wb, \
                Whimbrel(ddb_endpoint, table_prefix) as view:  # reads, unthrottled
            wb.create_tables()
            python = wb.engine.launchers["python"]
            assert isinstance(python, PythonLauncher)
            counter = CountingLauncher(python)
            wb.engine.launchers["python"] = counter
            wb.register_workflow(WorkflowDefinition("burst", (
                Act("a", launcher=NOOP), Act("b", ("a",), launcher=NOOP))))
            wb.register_workflow(WorkflowDefinition("wide", (Act(
                "each", launcher=NOOP, map_over="$input.xs", max_concurrency=20),)))

            def start(name: str, input: Any, request_id: str) -> str:
                # A caller whose start is throttled past the store's tries sends it again
                # (same request id: the same one run, its start resumed).
                refused = 0
                while True:
                    try:
                        return wb.start_workflow(name, input, request_id=request_id)
                    except StoreError as exc:
                        refused += 1
                        assert exc.retryable and refused < 50, exc
                        starts_refused.append(request_id)

            starts_refused: list[str] = []
            advanced: list[int] = []
            wide = start("wide", {"xs": list(range(ITEMS))}, "wide")
            with ThreadPoolExecutor(16) as pool:
                runs = list(pool.map(lambda i: start("burst", None, f"burst-{i}"),
                                     range(RUNS)))
            assert len(set(runs)) == RUNS
            left = {*runs, wide}
            sweeps: list[dict[str, object]] = []
            still = [0]  # polls in a row that ended no run

            def all_ended() -> bool:
                # The test is the heartbeat listener: one pass per poll, throttled too.
                sweeps.append(wb.sweep().to_dict())
                before = len(left)
                left.difference_update(
                    [wx for wx in left if view.get_workflow(wx).state.is_terminal])
                still[0] = 0 if len(left) < before else still[0] + 1
                if left and still[0] >= STILL_POLLS:
                    # A run whose follow-up and whose visit_soon were both throttled for
                    # good waits for its scheduled reconcile visit: let that time pass
                    # (real time, it was 2 min of a 2 min 15 s test one run in three).
                    clock.advance(RECONCILE_GRACE_SECONDS)
                    advanced.append(len(left))
                    still[0] = 0
                return not left

            def stuck() -> str:
                return f"{len(left)} runs stuck: " + repr({
                    wx: [(a.activity_name, a.state.value, a.error) for a in
                         view.get_workflow(wx).activities if not a.state.is_terminal][:5]
                    for wx in sorted(left)[:5]})

            wait_until(all_ended, timeout=PATIENCE, interval=0.5, message=stuck)
            for wx in [*runs, wide]:
                wf = view.get_workflow(wx)
                assert wf.state is WorkflowState.COMPLETED, (wx, wf.state, wf.error)

            # Nothing lost: every item's output is in the map's, in order.
            (each,) = [a for a in view.get_workflow(wide).activities
                       if a.activity_name == "each"]
            assert each.output == [None] * ITEMS, each.output
            # No attempt launched twice, every activity launched, none retried.
            assert max(counter.launches.values()) == 1, counter.launches.most_common(3)
            assert len(counter.launches) == 2 * RUNS + ITEMS
            assert all(aeid.endswith(":1") for aeid in counter.launches)
            # The throttling happened, and the store backed off from it (its meter).
            assert throttle.total > 0, throttle.throttled
            assert wb.meter.total_throttles > 0, wb.meter.snapshot()
            assert wb.meter.backoff_seconds > 0, wb.meter.snapshot()
            # Nothing escaped a worker thread (an end never recorded).
            assert python.failures == 0
            assert wb.engine.incidents["finish_given_up"] == 0
            print(f"throttled {throttle.total} ({dict(throttle.throttled)}); store "
                  f"retries {wb.meter.total_throttles}, back-off "
                  f"{wb.meter.backoff_seconds:.1f} s; incidents "
                  f"{wb.engine.incidents.snapshot()}; {len(starts_refused)} starts sent "
                  f"again; {len(sweeps)} sweeps; time advanced past the reconcile grace "
                  f"{len(advanced)} times (runs left then: {advanced})")
    finally:
        meter.close()


class StoreTrouble:
    """A store write hook: on an activity thread, the ``at``-th write to
    ``activity_exec`` raises a ``StoreError`` (``phase`` ``after``: the write landed
    and its answer was lost; ``before``: it never reached DynamoDB), once."""

    def __init__(self, at: int, phase: str, *, retryable: bool = True) -> None:
        self.at, self.phase, self.retryable = at, phase, retryable
        self.seen = 0
        self.fired = False
        self._lock = threading.Lock()

    def __call__(self, phase: str, operation: str, table: str) -> None:
        if not threading.current_thread().name.startswith("whimbrel-activity") \
                or not table.endswith("activity_exec"):
            return
        with self._lock:
            if phase == "before":
                self.seen += 1
            fire = not self.fired and self.seen == self.at and phase == self.phase
            self.fired |= fire
        if fire:
            raise StoreError(f"{operation}: ProvisionedThroughputExceededException "
                             "(injected)", aws_code="ProvisionedThroughputExceededException",
                             retryable=self.retryable)


def _chain(wb: Whimbrel) -> CountingLauncher:
    python = wb.engine.launchers["python"]
    counter = CountingLauncher(python)
    wb.engine.launchers["python"] = counter
    wb.register_workflow(WorkflowDefinition("chain", (
        Act("a", launcher=NOOP), Act("b", ("a",), launcher=NOOP))))
    return counter


def _ended(wb: Whimbrel, wx: str) -> WorkflowState | None:
    state = wb.get_workflow(wx).state
    return state if state.is_terminal else None


def test_an_end_write_that_landed_but_raised_is_retried_and_its_follow_ups_run(
        ddb_endpoint: str, table_prefix: str) -> None:
    with Whimbrel(ddb_endpoint, table_prefix) as wb:
        wb.create_tables()
        counter = _chain(wb)
        trouble = StoreTrouble(at=1, phase="after")  # a's COMPLETED write, answer lost
        wb.store.write_hooks.append(trouble)
        wx = wb.start_workflow("chain")
        assert wait_until(lambda: _ended(wb, wx), timeout=30) is WorkflowState.COMPLETED
        assert trouble.fired
        incidents = wb.engine.incidents
        assert (incidents["finish_retried"], incidents["finish_landed"]) == (1, 1)
        assert incidents["followup_failed"] == 0  # the move itself raised, not a follow-up
        assert sorted(counter.launches.values()) == [1, 1]  # a and b, once each


def test_a_follow_up_that_fails_for_good_is_repaired_by_the_next_sweep(
        ddb_endpoint: str, table_prefix: str) -> None:
    with Whimbrel(ddb_endpoint, table_prefix) as wb:
        wb.create_tables()
        counter = _chain(wb)
        # a's COMPLETED lands; the follow-up's write (b's launch) fails, not retryably:
        # the worker gives up, and only the reconciler can launch b.
        trouble = StoreTrouble(at=2, phase="before", retryable=False)
        wb.store.write_hooks.append(trouble)
        wx = wb.start_workflow("chain")
        wait_until(lambda: wb.engine.incidents["finish_given_up"], timeout=30)
        assert trouble.fired and wb.engine.incidents["followup_failed"] == 1
        assert [a.state.value for a in wb.get_workflow(wx).activities] \
            == ["COMPLETED", "REQUESTED"]
        # Its reconcile visit was moved to now (not 120 s after the start): the very
        # next sweep visits it and launches b.
        check = wb.store.get_workflow(wx)
        assert check is not None and check.check_epoch is not None
        assert check.check_epoch <= wb.clock()
        assert wx in wb.sweep().reconciled
        assert wait_until(lambda: _ended(wb, wx), timeout=30) is WorkflowState.COMPLETED
        assert sorted(counter.launches.values()) == [1, 1]
        assert wb.engine.launchers["python"] is counter
        assert counter.inner.failures == 1  # type: ignore[attr-defined]
