"""Activity code of the order-approval workflow (python launcher)."""

from __future__ import annotations

from typing import Any

from whimbrel import ActivityRun


def take_order(run: ActivityRun) -> dict[str, Any]:
    item = (run.input or {}).get("item", "kettle")
    return {"order": f"order-{item}", "item": item, "total_eur": 39.9}


def ship(run: ActivityRun) -> dict[str, Any]:
    item = (run.input or {}).get("item", "kettle")
    approval = run.upstream["approve"]  # {"approved": true, "by", "comment", "at"}
    return {"shipped": f"order-{item}", "approved_by": approval["by"]}
