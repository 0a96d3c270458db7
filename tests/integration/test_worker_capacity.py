"""A process holds at most ``max_workers`` python attempts.

An attempt is RUNNING only once a thread can run it: with every thread busy, the engine
leaves the next attempts READY and claimable, and this process's claim loop takes each as
a thread frees. (Before, they were moved to RUNNING and queued in the executor, where no
heartbeat ran: under load their heartbeat time-out fired and used up their retries — the
soak's "unplanned time-outs", 26 of 436 activities on an idle machine.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import wb_test_activities as acts

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    LauncherSpec,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.testing import wait_until

WIDTH = 6
CAPACITY = 2


@pytest.fixture
def gate() -> Iterator[None]:
    acts.GATE.clear()
    acts.GATED.update(now=0, most=0)
    yield
    acts.GATE.set()  # never leave a thread waiting, even when the test failed


def test_a_full_process_leaves_attempts_claimable_not_queued(
        ddb_endpoint: str, table_prefix: str, gate: None) -> None:
    wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                  max_workers=CAPACITY)
    wb.create_tables()
    try:
        wb.register_workflow(WorkflowDefinition(name="wide", activities=[
            ActivityDefinition(name=f"g{i}", launcher=LauncherSpec.python(
                "wb_test_activities:gated"), heartbeat_timeout_seconds=600)
            for i in range(WIDTH)]))
        wx = wb.start_workflow("wide", {})

        wait_until(lambda: acts.GATED["now"] == CAPACITY, timeout=30,
                   message=lambda: f"{acts.GATED} running, expected {CAPACITY}")
        states = [a.state for a in wb.store.list_activities(wx)]
        assert states.count(ActivityState.RUNNING) == CAPACITY, states
        assert states.count(ActivityState.READY) == WIDTH - CAPACITY, states

        acts.GATE.set()
        run = wb.wait(wx, timeout=60)
        assert run.state == WorkflowState.COMPLETED, run.error
        assert acts.GATED["most"] == CAPACITY
        assert all(acts.RUNS[a.activity_exec_id] == 1 for a in run.activities)
    finally:
        wb.close()
        wb.store.delete_tables()
