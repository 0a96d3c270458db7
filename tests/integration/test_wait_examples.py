"""The examples of issue 13 run as documented: examples/approval (order → approval →
ship) and examples/payment (wait for a payment signal, with a timeout)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from whimbrel import ActivityState, Whimbrel, WorkflowState

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / name / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("reject", [False, True])
def test_the_approval_example(wb: Whimbrel, reject: bool) -> None:
    wf = _example("approval").run(wb, reject=reject)
    if reject:
        assert wf.state is WorkflowState.FAILED
        assert "rejected by bob: out of stock" in (wf.error or "")
    else:
        assert wf.state is WorkflowState.COMPLETED
        assert wf.output["ship"] == {"shipped": "order-kettle", "approved_by": "alice"}


@pytest.mark.parametrize("pay", [True, False])
def test_the_payment_example(wb: Whimbrel, pay: bool) -> None:
    wf = _example("payment").run(wb, pay=pay)
    if pay:
        assert wf.state is WorkflowState.COMPLETED
        assert wf.output["fulfil"] == {"fulfilled": "inv-o-17", "paid_eur": 25.0}
    else:
        assert wf.state is WorkflowState.FAILED
        assert wf.activity("payment").state is ActivityState.TIMED_OUT
        assert "no signal 'paid' within its timeout_seconds (3600 s)" in (wf.error or "")
