"""JSON payloads (inputs, outputs, errors): checked for size, depth and type up front."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.limits import MAX_ERROR_CHARS, MAX_JSON_DEPTH


def json_depth(value: Any, limit: int) -> int:
    """How deep ``value`` nests (counted only up to just past ``limit``)."""
    # Iterative, so hostile nesting cannot exhaust the interpreter's stack; a container
    # met again (YAML aliases share one object) is walked again only if now deeper, so
    # an alias "billion laughs" costs its few distinct nodes, not its expansion.
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen: dict[int, int] = {}
    deepest = 0
    while stack:
        cur, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        if isinstance(cur, dict | list | tuple):
            if seen.get(id(cur), 0) >= depth:
                continue
            seen[id(cur)] = depth
        if isinstance(cur, dict):
            stack.extend((v, depth + 1) for v in cur.values())
        elif isinstance(cur, list | tuple):
            stack.extend((v, depth + 1) for v in cur)
    return deepest


def json_values(value: Any, memo: dict[int, int] | None = None) -> int:
    """How many values ``value`` holds once shared containers (YAML aliases) are expanded,
    computed without expanding them. Call it only on data :func:`json_depth` bounded
    (it recurses, and a cycle would never end)."""
    if not isinstance(value, dict | list | tuple):
        return 1
    memo = {} if memo is None else memo
    key = id(value)
    if key not in memo:
        children = value.values() if isinstance(value, dict) else value
        memo[key] = 1 + sum(json_values(c, memo) for c in children)
    return memo[key]


def encode_payload(value: Any, *, field: str, max_bytes: int) -> str | None:
    """JSON text for ``value`` (None stays None).

    Raises:
        InvalidInput: not JSON-serialisable, nested deeper than the limit, or too large.
    """
    if value is None:
        return None
    if json_depth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise InvalidInput(f"{field} is nested deeper than {MAX_JSON_DEPTH} levels", field=field)
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{field} is not JSON-serialisable: {exc}", field=field) from exc
    try:
        size = len(text.encode())
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{field} is not valid Unicode text: {exc.reason} "
                           f"at position {exc.start}", field=field) from None
    if size > max_bytes:
        raise InvalidInput(
            f"{field} is {size} bytes of JSON, more than the limit of {max_bytes}", field=field
        )
    return text


def payload_digest(text: str | None) -> str:
    """A digest of a JSON payload's value, alike for every spelling of it (key order,
    spacing): what tells a request repeated from another under the same id."""
    value = json.loads(text) if text is not None else None
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


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
