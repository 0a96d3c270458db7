"""examples/code_workflows (issue 26) runs as documented: a poll-until-done loop, a saga
compensating in reverse order, an order with a signal, an approval and properties, a
booking that releases its hold when cancelled while it waits."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from whimbrel import Whimbrel, WorkflowState

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code_workflows" / "run.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_code_workflows", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_poll_loop_looks_until_the_job_is_done(wb: Whimbrel) -> None:
    run = _example().poll(wb)
    assert run.state is WorkflowState.COMPLETED, run
    assert run.output["done"] and run.output["looks"] == 3
    assert [a.activity_name for a in run.activities] == [
        "check_job#1", "sleep#1", "check_job#2", "sleep#2", "check_job#3"]


def test_the_saga_compensates_in_reverse_order_and_fails(wb: Whimbrel) -> None:
    run = _example().saga(wb)
    assert run.state is WorkflowState.FAILED, run
    assert "card declined for 1200 EUR" in (run.error or "")
    assert [a.activity_name for a in run.activities] == [
        "book_flight#1", "book_hotel#1", "charge_card#1", "cancel_hotel#1",
        "cancel_flight#1"]
    assert run.activity("cancel_hotel#1").output == {"cancelled": "H-t-1"}


def test_the_saga_completes_when_the_charge_goes_through(wb: Whimbrel) -> None:
    run = _example().saga(wb, eur=300)
    assert run.state is WorkflowState.COMPLETED, run
    assert run.output == {"flight": "LH-t-1", "hotel": "H-t-1", "charged": 300}


def test_the_order_waits_for_payment_and_approval_and_shows_its_stage(
        wb: Whimbrel) -> None:
    run = _example().order(wb)
    assert run.state is WorkflowState.COMPLETED, run
    assert run.output == {"shipped": "o-17", "approved_by": "alice"}
    assert run.properties == {"order": "o-17", "stage": "shipped", "paid_eur": 25.0}


def test_the_booking_cancelled_while_it_waits_releases_its_hold(wb: Whimbrel) -> None:
    run = _example().cancelled_booking(wb)
    assert run.state is WorkflowState.CANCELLED, run
    assert [(a.activity_name, a.state.value) for a in run.activities] == [
        ("hold_seats#1", "COMPLETED"), ("signal-paid#1", "CANCELLED"),
        ("release_seats#1", "COMPLETED")]
    assert run.activity("release_seats#1").output == {"released": "s-9/2"}
    assert run.properties == {"stage": "hold released"}
