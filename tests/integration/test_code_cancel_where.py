"""A code run's clean-up decision runs where the code is (issue 26): a cancel from a
process that is no worker for the workflow leaves the clean-up decision for one, which
takes it and cleans up; the run ends CANCELLED there (docs/code-workflows.md, "Clean-up
on cancel")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import wb_code_cancel as code

from whimbrel import ActivityState, Whimbrel, WorkflowState
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.testing import wait_until

W = WorkflowState
A = ActivityState


@pytest.fixture
def other(wb: Whimbrel, ddb_endpoint: str, table_prefix: str) -> Iterator[Whimbrel]:
    """A second client of ``wb``'s tables that registers and starts nothing."""
    second = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix)
    yield second
    second.close()


def test_a_cancel_from_a_process_without_the_code_leaves_the_clean_up_for_a_worker(
        wb: Whimbrel, other: Whimbrel) -> None:
    wb.register_workflow(code.cleanup_finally)
    wx = wb.start_workflow("cleanup_finally")
    wait = f"{wx}:signal-go#1:1"
    wait_until(lambda: (a := other.store.get_activity(wait)) is not None
               and a.state is A.READY, timeout=30)
    other.cancel_workflow(wx)
    asked = other.engine.feature(CodeRuns)
    assert asked.decisions == 0 and asked.left == 1  # no code here: left for a worker
    # `wb`, the client that registered it, takes the entry in its claim loop.
    run = wait_until(lambda: (r := wb.get_workflow(wx)).state is W.CANCELLED and r,
                     timeout=30)
    assert {a.activity_name: a.state for a in run.activities} == {
        "signal-go#1": A.CANCELLED, "dispose#1": A.COMPLETED}
    assert code.CALLS[(wx, "dispose#1")] == 1
