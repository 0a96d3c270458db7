"""Activity code of the wait-for-payment workflow (python launcher)."""

from __future__ import annotations

from typing import Any

from whimbrel import ActivityRun


def invoice(run: ActivityRun) -> dict[str, Any]:
    order = (run.input or {}).get("order", "order-1")
    return {"invoice": f"inv-{order}", "due_eur": 25.0}


def fulfil(run: ActivityRun) -> dict[str, Any]:
    paid = run.upstream["payment"]  # the signal's payload: the payment activity's output
    order = (run.input or {}).get("order", "order-1")
    return {"fulfilled": f"inv-{order}", "paid_eur": paid["eur"]}
