"""Lambda event-filter matching, for the subset of the syntax the stream consumers use.

A pattern is a JSON object mirroring the event. At a leaf, a list of conditions is
OR-ed; a condition is an exact value, ``{"exists": bool}``, ``{"prefix": str}`` or
``{"anything-but": [values]}``. Several patterns are OR-ed too. A missing field
matches only ``{"exists": false}`` (or nothing), as in Lambda.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["matches", "matches_any"]

_MISSING: Any = object()


def matches_any(patterns: Sequence[Mapping[str, Any]], event: Mapping[str, Any]) -> bool:
    """True when there are no patterns, or ``event`` matches at least one."""
    return not patterns or any(matches(p, event) for p in patterns)


def matches(pattern: Mapping[str, Any], event: Any) -> bool:
    """True when ``event`` matches every field of ``pattern``.

    Raises:
        ValueError: the pattern uses syntax outside the supported subset.
    """
    for key, want in pattern.items():
        value = event.get(key, _MISSING) if isinstance(event, Mapping) else _MISSING
        if isinstance(want, Mapping):
            if not matches(want, value if isinstance(value, Mapping) else {}):
                return False
        elif isinstance(want, list):
            if not any(_leaf(cond, value) for cond in want):
                return False
        else:
            raise ValueError(f"filter field {key!r} must be an object or a list, not {want!r}")
    return True


def _leaf(cond: Any, value: Any) -> bool:
    if isinstance(cond, Mapping):
        if set(cond) == {"exists"}:
            return (value is not _MISSING) is bool(cond["exists"])
        if set(cond) == {"prefix"}:
            return isinstance(value, str) and value.startswith(str(cond["prefix"]))
        if set(cond) == {"anything-but"}:
            banned = cond["anything-but"]
            banned = banned if isinstance(banned, list) else [banned]
            return value is not _MISSING and not any(_equal(b, value) for b in banned)
        raise ValueError(f"unsupported filter condition {dict(cond)!r}")
    if value is _MISSING:
        return False
    if isinstance(value, list):
        return any(_equal(cond, v) for v in value)
    return _equal(cond, value)


def _equal(want: Any, value: Any) -> bool:
    # JSON true is not 1: compare booleans by identity, everything else by value.
    if isinstance(want, bool) or isinstance(value, bool):
        return isinstance(want, bool) and isinstance(value, bool) and want is value
    return bool(want == value)
