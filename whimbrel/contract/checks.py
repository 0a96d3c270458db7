"""Argument checks at the public boundary: wrong types and values become ``InvalidInput``
naming the field, before anything reaches DynamoDB (where they would surface as an
opaque ``StoreError`` after retries, or be stored)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.limits import WORKFLOW_NAME_PATTERN

_WORKFLOW_NAME = re.compile(WORKFLOW_NAME_PATTERN)
MAX_VERSION = 2**31 - 1
MAX_SOURCE_CHARS = 256
MAX_ID_CHARS = 1024


def kind(value: Any) -> str:
    """What ``value`` is, for a message, as a person would say it: ``null`` for None
    (not "a NoneType"), ``a bool``, ``an int``, ``a list``..."""
    if value is None:
        return "null"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _shown(value: Any) -> str:
    return repr(value)[:80]


def text(value: Any, field: str, *, max_chars: int = MAX_ID_CHARS) -> str:
    """A non-empty str of valid Unicode, at most ``max_chars`` long."""
    ok = isinstance(value, str) and 0 < len(value) <= max_chars
    if ok:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            ok = False
    if not ok:
        raise InvalidInput(f"{field} must be a non-empty string of valid Unicode of at most "
                           f"{max_chars} characters, not {_shown(value)}", field=field)
    return str(value)


def optional_text(value: Any, field: str, *, max_chars: int = MAX_SOURCE_CHARS) -> str | None:
    return None if value is None else text(value, field, max_chars=max_chars)


def workflow_name(value: Any, field: str = "workflow_name") -> str:
    if not isinstance(value, str) or not _WORKFLOW_NAME.match(value):
        raise InvalidInput(f"{field} must match {WORKFLOW_NAME_PATTERN}, not {_shown(value)}",
                           field=field)
    return value


def version(value: Any, field: str = "version") -> int | None:
    """None (latest) or an int from 1 to 2**31 - 1 (a bool is not a version)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_VERSION:
        raise InvalidInput(f"{field} must be an integer from 1 to {MAX_VERSION}, "
                           f"not {_shown(value)}", field=field)
    return value


def day(value: Any, field: str = "day") -> str:
    """A UTC day as ``YYYY-MM-DD``."""
    try:
        if not isinstance(value, str) or len(value) != 10:
            raise ValueError(value)
        datetime.strptime(value, "%Y-%m-%d")
    except ValueError:
        raise InvalidInput(f"{field} must be a date as YYYY-MM-DD, not {_shown(value)}",
                           field=field) from None
    return value


def limit(value: Any, field: str = "limit") -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{field} must be an integer >= 1, not {_shown(value)}", field=field)
    return value


def epoch(value: Any, field: str = "now") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise InvalidInput(f"{field} must be epoch seconds (a number), not {_shown(value)}",
                           field=field)
    return float(value)
