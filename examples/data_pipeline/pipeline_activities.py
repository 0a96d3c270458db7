"""Activity code of the daily-sales pipeline.

Each function receives an :class:`whimbrel.ActivityRun`: ``run.input`` is the workflow
input merged with the activity's static ``input``; ``run.upstream`` holds the outputs
of the activities it depends on. The return value becomes the activity's output
(JSON, at most 64 KB: pass references such as S3 keys for bigger data).
"""

from __future__ import annotations

import random
from typing import Any

from whimbrel import ActivityRun

REGIONS = ("eu", "us", "apac")


def extract(run: ActivityRun) -> dict[str, Any]:
    day = (run.input or {}).get("day", "2024-06-01")  # submitted without input: a default day
    rng = random.Random(day)
    orders = [{"id": i, "region": rng.choice(REGIONS), "amount": round(rng.uniform(5, 500), 2)}
              for i in range(300)]
    run.heartbeat()  # long steps heartbeat (the background thread does too)
    # A real pipeline writes the batch to S3 and returns the key.
    return {"day": day, "orders": orders}


def transform(run: ActivityRun) -> dict[str, Any]:
    region = run.input["region"]
    if region == "apac" and run.attempt == 1 and run.input.get("flaky", False):
        raise ConnectionError("apac currency service timed out")  # retried by policy
    orders = [o for o in run.upstream["extract"]["orders"] if o["region"] == region]
    rate = {"eu": 1.08, "us": 1.0, "apac": 0.0066}[region]
    total = round(sum(o["amount"] for o in orders) * rate, 2)
    return {"region": region, "orders": len(orders), "total_usd": total}


def aggregate(run: ActivityRun) -> dict[str, Any]:
    parts = [run.upstream[name] for name in sorted(run.upstream)]
    return {"by_region": {p["region"]: p["total_usd"] for p in parts},
            "orders": sum(p["orders"] for p in parts),
            "total_usd": round(sum(p["total_usd"] for p in parts), 2)}


def report(run: ActivityRun) -> dict[str, Any]:
    agg = run.upstream["aggregate"]
    lines = [f"{region:>5}: {usd:>12,.2f} USD" for region, usd in agg["by_region"].items()]
    text = "\n".join([f"sales {(run.input or {}).get('day', '')}", *lines,
                      f"total: {agg['total_usd']:,.2f} USD ({agg['orders']} orders)"])
    print(text)
    return {"report": text}
