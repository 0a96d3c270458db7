"""JSON payloads (inputs, outputs, errors): checked for size, depth and type up front."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.limits import (
    MAX_ERROR_CHARS,
    MAX_INPUT_BYTES,
    MAX_JSON_DEPTH,
    MAX_OUTPUT_BYTES,
)

#: A payload attribute whose text starts with this is a reference to the object in S3
#: that holds the value (``s3://bucket/key``): JSON text never starts with ``s``, so no
#: value can be mistaken for one.
REF_SCHEME = "s3://"
#: What a value too large without a bucket is told.
NO_BUCKET_HINT = ("; set payload_bucket (WHIMBREL_PAYLOAD_BUCKET) to keep larger "
                  "payloads in S3")
#: What a value too large with a bucket is told.
MAX_HINT = " (payload_max_bytes, WHIMBREL_PAYLOAD_MAX_BYTES)"


def is_ref(text: object) -> bool:
    """True when a payload's stored text is a reference to an S3 object."""
    return isinstance(text, str) and text.startswith(REF_SCHEME)


def parse_ref(ref: str, field: str = "ref") -> tuple[str, str]:
    """``(bucket, key)`` of ``s3://bucket/key``.

    Raises:
        InvalidInput: not of that form.
    """
    bucket, _, key = ref[len(REF_SCHEME):].partition("/") if is_ref(ref) else ("", "", "")
    if not bucket or not key:
        raise InvalidInput(f"{field} must be s3://bucket/key, not {ref!r}"[:300], field=field)
    return bucket, key


@dataclass(frozen=True)
class PayloadLimits:
    """How large a payload may be: today's limits without a bucket, ``max_bytes`` for
    every payload with one (``bucket`` set)."""

    bucket: str | None = None
    max_bytes: int = MAX_OUTPUT_BYTES

    @property
    def input_bytes(self) -> int:
        return self.max_bytes if self.bucket else MAX_INPUT_BYTES

    @property
    def output_bytes(self) -> int:
        return self.max_bytes if self.bucket else MAX_OUTPUT_BYTES

    @property
    def hint(self) -> str:
        return MAX_HINT if self.bucket else NO_BUCKET_HINT

    def encode(self, value: Any, field: str, *, run_input: bool = False) -> str | None:
        """:func:`encode_payload` under these limits (a run's input: ``run_input``).

        Raises:
            InvalidInput: not JSON-serialisable, nested too deep, or too large.
        """
        return encode_payload(value, field=field, hint=self.hint,
                              max_bytes=self.input_bytes if run_input else self.output_bytes)

    def check_size(self, text: str, field: str, *, run_input: bool = False) -> None:
        """Refuse JSON text larger than these limits allow.

        Raises:
            InvalidInput: too large.
        """
        limit = self.input_bytes if run_input else self.output_bytes
        size = len(text.encode())
        if size > limit:
            raise InvalidInput(f"{field} is {size} bytes of JSON, more than the limit of "
                               f"{limit}{self.hint}", field=field)


#: The limits of a store without a bucket.
NO_BUCKET = PayloadLimits()


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


def encode_payload(value: Any, *, field: str, max_bytes: int, hint: str = NO_BUCKET_HINT,
                   ) -> str | None:
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
            f"{field} is {size} bytes of JSON, more than the limit of {max_bytes}{hint}",
            field=field
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
