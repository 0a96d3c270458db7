"""examples/branching runs as documented (issue 22): an if/else branch that joins, and a
run ended early from inside an activity."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from whimbrel import ActivityState, Whimbrel, WorkflowExec, WorkflowState
from whimbrel.testing import assert_contract_holds, wait_until

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "branching"
A = ActivityState


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_branching", EXAMPLE / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("case", "states", "output"), [
    ("accept", {"refund": A.SKIPPED, "ship": A.COMPLETED},
     {"receipt": {"receipt_for": ["ship"], "shipped_to": "1 Quay St"}}),
    ("decline", {"refund": A.COMPLETED, "ship": A.SKIPPED},
     {"receipt": {"receipt_for": ["refund"], "refunded": "ch_0000", "currency": "EUR"}}),
])
def test_the_branches_join(wb: Whimbrel, case: str, states: dict[str, A],
                           output: dict[str, object]) -> None:
    wf = _example().run(wb, case)
    assert wf.state is WorkflowState.COMPLETED
    assert {n: wf.activity(n).state for n in states} == states
    assert wf.activity("receipt").state is A.COMPLETED
    assert wf.output["receipt"] == output["receipt"]
    assert_contract_holds(wf)


def test_fraud_ends_the_run_early(wb: Whimbrel) -> None:
    wx = _example().run(wb, "fraud").workflow_exec_id
    # The run's terminal write comes first; its follow-up then skips what it left.
    def settled() -> WorkflowExec | None:
        now = wb.get_workflow(wx)
        return now if all(a.state.is_terminal for a in now.activities) else None

    wf = wait_until(settled, timeout=30)
    assert wf.state is WorkflowState.COMPLETED
    assert wf.output == {"blocked": True, "reason": "card flagged as fraud"}
    assert wf.activity("charge").state is A.COMPLETED
    assert {wf.activity(n).state for n in ("refund", "ship", "receipt")} == {A.SKIPPED}


def test_run_py_as_written(ddb_endpoint: str, table_prefix: str) -> None:
    env = {**os.environ, "WHIMBREL_ENDPOINT_URL": ddb_endpoint,
           "WHIMBREL_TABLE_PREFIX": table_prefix}
    done = subprocess.run([sys.executable, "run.py", "--decline"], cwd=EXAMPLE, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "COMPLETED: charge COMPLETED, receipt COMPLETED, refund COMPLETED, ship SKIPPED" \
        in done.stdout
    with Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix) as wb:
        wb.store.delete_tables()
