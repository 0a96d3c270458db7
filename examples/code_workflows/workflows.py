"""Four code workflows: a poll-until-done loop, a saga that compensates in reverse
order, an order that waits for a payment signal and an approval while it shows its
progress in its properties, and a booking that releases its hold when it is cancelled
while it waits (docs/code-workflows.md)."""

from __future__ import annotations

from typing import Any

from shop_steps import (
    book_flight,
    book_hotel,
    cancel_flight,
    cancel_hotel,
    charge_card,
    check_job,
    hold_seats,
    release_seats,
    ship,
)

from whimbrel import (
    Cancelled,
    RetryPolicy,
    StepFailed,
    WaitTimedOut,
    WorkflowContext,
    workflow,
)


@workflow("poll_job")
def poll_job(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    """Look at a job until it is done, a second apart; a run polls at most 100 times,
    then continues as a new run (its history stays short)."""
    for _ in range(100):
        status = ctx.step(check_job, {"job": input["job"]})
        if status["done"]:
            return status
        ctx.sleep(1)
    ctx.continue_as_new(input)


@workflow("trip")
def trip(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    """Book a flight and a hotel, then charge; if the charge fails, undo what was done,
    last first, and fail with the charge's error."""
    undo = []
    try:
        flight = ctx.step(book_flight, input)
        undo.append((cancel_flight, flight))
        hotel = ctx.step(book_hotel, input)
        undo.append((cancel_hotel, hotel))
        charge = ctx.step(charge_card, input, retry=RetryPolicy(
            max_attempts=2, initial_interval_seconds=0, non_retryable=("CardDeclined",)))
    except StepFailed:
        for step, booking in reversed(undo):
            ctx.step(step, booking)
        raise
    return {**flight, **hotel, **charge}


@workflow("shop_order")
def shop_order(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    """Wait for the payment (a signal, kept if it comes early), then a person's
    approval; ``properties`` says where the order is."""
    ctx.properties.update(order=input["order"], stage="waiting for payment")
    try:
        paid = ctx.wait_signal("paid", timeout_seconds=3600)
    except WaitTimedOut:
        ctx.properties["stage"] = "not paid"
        return {"order": input["order"], "shipped": False}
    ctx.properties.update(stage="waiting for approval", paid_eur=paid["eur"])
    decision = ctx.wait_approval(["alice"], timeout_seconds=86400)
    ctx.properties["stage"] = "shipping"
    shipped = ctx.step(ship, {"order": input["order"], "approved_by": decision["by"]})
    ctx.properties["stage"] = "shipped"
    return shipped


@workflow("booking")
def booking(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    """Hold seats, then wait for the payment. Cancelled while it waits (the playbook's
    suspended step), its clean-up releases the hold: the wait raises ``Cancelled``, the
    release is a step like any, and the run ends CANCELLED."""
    hold = ctx.step(hold_seats, {"show": input["show"], "seats": input["seats"]})
    ctx.properties["stage"] = "held, waiting for payment"
    try:
        ctx.wait_signal("paid")
    except Cancelled:
        ctx.properties["stage"] = "releasing the hold"
        ctx.step(release_seats, hold)
        ctx.properties["stage"] = "hold released"
        raise
    ctx.properties["stage"] = "paid"
    return hold
