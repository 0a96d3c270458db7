"""Activity bodies the benchmarks run (``python`` launcher targets)."""

from __future__ import annotations

from typing import Any


def noop(run: Any) -> None:
    """Does nothing: what is left of the time is orchestration."""
    return None
