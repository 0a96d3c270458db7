"""A stream handler that always raises, for the dead-letter test (imported by name by
the local runtime, as it imports the real handlers)."""

from __future__ import annotations

from typing import Any


class PoisonRowError(Exception):
    """What the handler raises on every record."""


def boom(event: dict[str, Any], context: Any) -> dict[str, Any]:
    raise PoisonRowError(f"cannot apply {len(event['Records'])} record(s)")
