"""Clean-up on cancel through the local runtime (issue 26): a CANCEL row naming a code
run makes the stream handlers run its clean-up (they import the function by its
module:qualname); a second CANCEL row during the clean-up ends the run at once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import wb_code_cancel as code
from e2e_support import RawClient, event_row, wait_workflow

from whimbrel import ActivityState as A
from whimbrel import WorkflowState as W
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.engine.code_cancel import CANCELLED_AGAIN
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def hold() -> Iterator[None]:
    code.HOLD.clear()
    yield
    code.HOLD.set()  # never leave a step's thread waiting


def _state(rt: LocalRuntime, aeid: str) -> A | None:
    row = rt.client.store.get_activity(aeid)
    return None if row is None else row.state


def test_a_cancel_row_runs_the_clean_up_in_the_stream_handlers(
        runtime: LocalRuntime, raw: RawClient) -> None:
    runtime.client.engine.definitions.register(code.cleanup_finally.definition())
    request = raw.request("cleanup_finally")
    wx = workflow_exec_id_for(request)
    wait_until(lambda: _state(runtime, f"{wx}:signal-go#1:1") is A.READY, timeout=30)
    cancel = raw.row("CANCEL", workflow_exec_id=wx)
    assert event_row(runtime, cancel)["outcome"]["S"] == "APPLIED"
    run = wait_workflow(runtime, request, timeout=60)
    assert run.state is W.CANCELLED, run
    assert {a.activity_name: a.state for a in run.activities} == {
        "signal-go#1": A.CANCELLED, "dispose#1": A.COMPLETED}


def test_a_second_cancel_row_during_the_clean_up_ends_the_run_at_once(
        runtime: LocalRuntime, raw: RawClient) -> None:
    runtime.client.engine.definitions.register(code.cleanup_held.definition())
    request = raw.request("cleanup_held")
    wx = workflow_exec_id_for(request)
    wait_until(lambda: _state(runtime, f"{wx}:signal-go#1:1") is A.READY, timeout=30)
    first = raw.row("CANCEL", workflow_exec_id=wx)
    assert event_row(runtime, first)["outcome"]["S"] == "APPLIED"
    held = f"{wx}:held#1:1"
    wait_until(lambda: _state(runtime, held) is A.RUNNING, timeout=30)
    assert runtime.client.store.get_workflow(wx).state is W.CANCEL_REQUESTED  # type: ignore[union-attr]
    second = raw.row("CANCEL", workflow_exec_id=wx)
    assert event_row(runtime, second)["outcome"]["S"] == "APPLIED"
    run = wait_workflow(runtime, request, timeout=60)
    assert run.state is W.CANCELLED, run
    assert run.error == CANCELLED_AGAIN
    # Its end is recorded under the second row's tag: a redelivery of it is a duplicate.
    assert run.history[-1].state == "CANCELLED"
    assert run.history[-1].by == f"event:{second}"
    code.HOLD.set()
    wait_until(lambda: _state(runtime, held) is A.CANCELLED, timeout=30)
