"""A process holds at most ``max_workers`` python attempts.

An attempt is RUNNING only once a thread can run it: with every thread busy, the engine
leaves the next attempts READY and claimable, and this process's claim loop takes each as
a thread frees. (Before, they were moved to RUNNING and queued in the executor, where no
heartbeat ran: under load their heartbeat time-out fired and used up their retries — the
soak's "unplanned time-outs", 26 of 436 activities on an idle machine.)
"""

from __future__ import annotations

from collections.abc import Mapping

import wb_test_activities as acts

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    LauncherSpec,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.engine import LaunchRequest
from whimbrel.testing import wait_until

#: Eight roots: a run's roots are launched in parallel (engine/threads.py), so the
#: check and the start of each are apart in time: a thread is promised at the check.
WIDTH = 8
CAPACITY = 2


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


class Flipping:
    """A ``python`` launcher whose answer to "does this process run it?" is no once, then
    yes: what the real one answers when a thread frees (or its scope closes) between two
    questions about one attempt. It launches nothing."""

    in_process = True

    def __init__(self) -> None:
        self.asked = 0
        self.launched: list[str] = []

    def runs(self, config: Mapping[str, object]) -> bool:
        self.asked += 1
        return self.asked > 1

    def launch(self, request: LaunchRequest) -> None:
        self.launched.append(request.activity_exec_id)


def test_an_attempt_left_for_a_worker_is_claimable_whatever_the_next_answer() -> None:
    """The engine asks once per attempt: one left READY for a worker is claimable, even if
    the process could run it a moment later (it was left READY and claimable by no one)."""
    flipping = Flipping()
    wb = Whimbrel.in_memory(launchers={"python": flipping})
    try:
        wb.register_workflow(WorkflowDefinition("one", activities=[ActivityDefinition(
            name="a", launcher=LauncherSpec.python("wb_test_activities:gated"))]))
        wx = wb.start_workflow("one", {})
        (item,) = wb.store.list_activities(wx)
        assert item.state is ActivityState.READY and not flipping.launched
        assert item.claim_key is not None, "left READY, but claimable by no worker"
    finally:
        wb.close()
