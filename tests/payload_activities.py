"""Activities of the large-payload tests (tests/integration/test_payloads.py)."""

from __future__ import annotations

import json
from typing import Any

from whimbrel import ActivityRun


def sized(run: ActivityRun) -> Any:
    """An output of ``input["size"]`` characters (a JSON string two bytes longer)."""
    return "y" * int(run.input["size"])


def measure(run: ActivityRun) -> Any:
    """What this attempt saw, by size: its input and each upstream's output."""
    return {"input": len(json.dumps(run.input)),
            "upstream": {k: len(json.dumps(v)) for k, v in run.upstream.items()}}
