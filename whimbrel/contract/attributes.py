"""A run's attributes: a few short strings or numbers of the caller's own
(``start_workflow(..., attributes={"customer": "c-17"})``) that runs are found by
(``list_workflows(attributes=...)``, ``whimbrel runs --attr customer=c-17``). Pure:
checks and the index key; the store keeps them (``workflow_attribute``)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from whimbrel.contract.errors import InvalidInput

#: At most this many attributes a run: each is one index entry written at its start.
MAX_ATTRIBUTES = 10
#: An attribute's name: a letter, then letters, digits, ``_``, ``-`` or ``.``.
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
#: A text value's longest length (characters).
MAX_VALUE_CHARS = 256

Attributes = dict[str, "str | int | float"]


def check(value: Any, field: str = "attributes") -> Attributes:
    """``value`` as attributes (None: none).

    Raises:
        InvalidInput: not a mapping, more than :data:`MAX_ATTRIBUTES`, a bad name, or a
            value that is not a short non-empty string or a finite number.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{field} must be a mapping of names to short strings or numbers, "
                           f"not {type(value).__name__}", field=field)
    if len(value) > MAX_ATTRIBUTES:
        raise InvalidInput(f"{field} has {len(value)} entries, more than the "
                           f"{MAX_ATTRIBUTES} a run may have", field=field)
    out: Attributes = {}
    for name, item in value.items():
        if not isinstance(name, str) or not NAME.match(name):
            raise InvalidInput(f"{field}: name {name!r} must be a letter then up to 63 "
                               "letters, digits, '_', '-' or '.'", field=field)
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise InvalidInput(f"{field}[{name!r}] must be a string or a number, not "
                               f"{type(item).__name__}", field=field)
        if isinstance(item, float) and not math.isfinite(item):
            raise InvalidInput(f"{field}[{name!r}] must be a finite number, not {item!r}",
                               field=field)
        if isinstance(item, str) and not 0 < len(item) <= MAX_VALUE_CHARS:
            raise InvalidInput(f"{field}[{name!r}] must be 1 to {MAX_VALUE_CHARS} "
                               f"characters, not {len(item)}", field=field)
        if isinstance(item, int) and abs(item) >= 10**38:
            raise InvalidInput(f"{field}[{name!r}] is too large a number", field=field)
        out[name] = item
    return out


def encode(attributes: Attributes) -> str | None:
    """The run item's ``attributes`` (JSON text; None when there are none)."""
    return json.dumps(attributes, sort_keys=True, separators=(",", ":")) if attributes \
        else None


def decode(text: str | None) -> Attributes:
    if not text:
        return {}
    value = json.loads(text)
    return dict(value) if isinstance(value, dict) else {}


def value_text(value: str | int | float) -> str:
    """One value as its index key spells it: its type, then the value (``s:c-17``,
    ``n:17``; an integral float is the same number as the int: ``n:17``)."""
    if isinstance(value, str):
        return f"s:{value}"
    number = float(value)
    return f"n:{int(number)}" if number.is_integer() else f"n:{number!r}"


def matches(have: Attributes, want: Attributes) -> bool:
    """Whether a run's attributes hold every wanted one (numbers compared as numbers)."""
    return all(name in have and value_text(have[name]) == value_text(value)
               for name, value in want.items())
