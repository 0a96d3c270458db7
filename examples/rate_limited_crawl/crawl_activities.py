"""Activity code of the crawl (python launcher). ``fetch`` stands in for an HTTP call to
a rate-limited API (no network here: the example runs anywhere); the pool, not this
code, keeps it under the API's limits."""

from __future__ import annotations

import hashlib
from typing import Any

from whimbrel import ActivityRun


def fetch(run: ActivityRun) -> dict[str, Any]:
    url = str(run.input)
    size = int(hashlib.sha256(url.encode()).hexdigest()[:4], 16)  # the page's "size"
    return {"url": url, "bytes": size}


def summarise(run: ActivityRun) -> dict[str, Any]:
    pages = run.upstream["fetch"]
    return {"pages": len(pages), "bytes": sum(p["bytes"] for p in pages)}
