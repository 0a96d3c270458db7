"""Activity code of the charge-branch workflow (python launcher)."""

from __future__ import annotations

from typing import Any

from whimbrel import ActivityRun


def charge(run: ActivityRun) -> dict[str, Any]:
    card = run.input.get("card", "4242")
    if card == "6666":  # flagged: nothing else of this run should happen
        run.end_workflow({"blocked": True, "reason": "card flagged as fraud"})
        return {}
    status = "declined" if card == "0000" else "ok"
    return {"id": f"ch_{card}", "status": status, "amount_eur": run.input.get("eur", 10)}


def refund(run: ActivityRun) -> dict[str, Any]:
    # input_from put these keys in the input: the charge's id and the run's currency.
    return {"refunded": run.input["charge_id"], "currency": run.input["currency"]}


def ship(run: ActivityRun) -> dict[str, Any]:
    return {"shipped_to": run.input["address"]}


def receipt(run: ActivityRun) -> dict[str, Any]:
    # The branch that did not run reads null.
    done = {name: out for name, out in run.upstream.items() if out is not None}
    return {"receipt_for": sorted(done), **next(iter(done.values()), {})}
