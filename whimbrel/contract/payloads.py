"""JSON payloads (inputs, outputs, errors): checked for size, depth and type up front."""

from __future__ import annotations

import json
from typing import Any

from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.limits import MAX_ERROR_CHARS, MAX_JSON_DEPTH


def _depth(value: Any, limit: int) -> int:
    # Iterative, so hostile nesting cannot exhaust the interpreter's stack.
    stack: list[tuple[Any, int]] = [(value, 1)]
    deepest = 0
    while stack:
        cur, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        if isinstance(cur, dict):
            stack.extend((v, depth + 1) for v in cur.values())
        elif isinstance(cur, list | tuple):
            stack.extend((v, depth + 1) for v in cur)
    return deepest


def encode_payload(value: Any, *, field: str, max_bytes: int) -> str | None:
    """JSON text for ``value`` (None stays None).

    Raises:
        InvalidInput: not JSON-serialisable, nested deeper than the limit, or too large.
    """
    if value is None:
        return None
    if _depth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise InvalidInput(f"{field} is nested deeper than {MAX_JSON_DEPTH} levels", field=field)
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{field} is not JSON-serialisable: {exc}", field=field) from exc
    size = len(text.encode())
    if size > max_bytes:
        raise InvalidInput(
            f"{field} is {size} bytes of JSON, more than the limit of {max_bytes}", field=field
        )
    return text


def decode_payload(text: str | None, *, field: str) -> Any:
    """Parse stored JSON text; raw clients may also have stored plain data."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{field} holds invalid JSON: {exc}", field=field) from exc


def clip_error(error: Any) -> str | None:
    """Errors are never rejected for size (a failure must not be lost): long ones are cut."""
    if error is None:
        return None
    text = error if isinstance(error, str) else json.dumps(error, default=str)
    if len(text) > MAX_ERROR_CHARS:
        keep = MAX_ERROR_CHARS - 40
        text = text[:keep] + f"... [{len(text) - keep} characters cut]"
    return text
