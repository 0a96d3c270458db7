"""DynamoDB JSON (``{"S": "x"}``, ``{"M": {...}}``) to plain Python and back: the one
codec of attribute values. Pure, so the store (its items) and the engine's intake (stream
images a raw client wrote) share it.

Reading is strict: a value DynamoDB could not hold (an unknown type tag, a number that
is not a finite decimal within DynamoDB's range) raises :class:`ValueError` naming the
problem; numbers come back as ``int`` when integral, else ``float``; binary as bytes.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["from_ddb", "item_size", "number", "to_ddb"]

AttrValue = dict[str, Any]

#: DynamoDB numbers: up to 38 significant digits, magnitude 1E-130 to 9.99…E+125.
_MAX_DIGITS = 38
_MAX_EXPONENT = 126
_MIN_EXPONENT = -130


def number(value: float | int) -> str:
    """A Python number as DynamoDB's ``N`` text (integral floats without ``.0``)."""
    if isinstance(value, bool):
        raise TypeError("a bool is not a number")
    if isinstance(value, int) or (float(value).is_integer() and abs(value) < 2**53):
        return str(int(value))
    return repr(float(value))


def _parse_number(text: object) -> int | float:
    try:
        value = Decimal(str(text))
    except (InvalidOperation, ValueError):
        raise ValueError(f"{text!r} is not a number") from None
    if not value.is_finite():
        raise ValueError(f"number {text} is not finite")
    digits = value.as_tuple()
    if value and (len(digits.digits) > _MAX_DIGITS
                  or not _MIN_EXPONENT <= value.adjusted() < _MAX_EXPONENT):
        raise ValueError(f"number {str(text)[:40]} is beyond what DynamoDB can store")
    if value == value.to_integral_value():
        return int(value)
    return float(value)


def from_ddb(av: Mapping[str, Any]) -> Any:
    """One DynamoDB attribute value as plain Python.

    Raises:
        ValueError: not an attribute value DynamoDB could hold (message says why).
        RecursionError: nested deeper than Python's stack (callers name the field).
    """
    if not isinstance(av, Mapping) or len(av) != 1:
        raise ValueError("an attribute value has exactly one type tag")
    (tag, value), = av.items()
    if tag == "S":
        if not isinstance(value, str):
            raise ValueError("S holds text")
        return value
    if tag == "N":
        return _parse_number(value)
    if tag == "BOOL":
        if not isinstance(value, bool):
            raise ValueError("BOOL holds true or false")
        return value
    if tag == "NULL":
        return None
    if tag == "M":
        if not isinstance(value, Mapping):
            raise ValueError("M holds a map")
        return {str(k): from_ddb(v) for k, v in value.items()}
    if tag == "L":
        if not isinstance(value, list | tuple):
            raise ValueError("L holds a list")
        return [from_ddb(v) for v in value]
    if tag == "SS":
        return sorted(str(v) for v in value)
    if tag == "NS":
        return sorted(_parse_number(v) for v in value)
    if tag == "B":
        return _binary(value)
    if tag == "BS":
        return sorted(_binary(v) for v in value)
    raise ValueError(f"unknown DynamoDB type {tag!r}")


def _binary(value: object) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("B holds base64") from None


def to_ddb(value: Any) -> AttrValue:
    """A plain Python value (None, bool, str, number, mapping, list) as DynamoDB JSON.

    Raises:
        TypeError: a value DynamoDB JSON cannot express.
    """
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, int | float):
        return {"N": number(value)}
    if isinstance(value, bytes | bytearray):
        return {"B": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, Mapping):
        return {"M": {str(k): to_ddb(v) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return {"L": [to_ddb(v) for v in value]}
    raise TypeError(f"cannot store {type(value).__name__}")


def item_size(item: Mapping[str, Any]) -> int:
    """The size DynamoDB counts for an item (DynamoDB JSON), in bytes, by its rules:
    each attribute's name plus its value (text and binary as their bytes, a number one
    byte per two significant digits plus one, a list or map 3 bytes plus its elements,
    one more each). Never raises: a value it cannot read counts as its JSON text."""
    return sum(_utf8(name) + _value_size(av) for name, av in item.items())


def _utf8(text: Any) -> int:
    return len(str(text).encode("utf-8", "surrogatepass"))


def _value_size(av: Any) -> int:
    try:
        (tag, value), = av.items()
        if tag == "S":
            return _utf8(value)
        if tag == "N":
            return _number_size(value)
        if tag == "B":
            return len(_binary(value))
        if tag in ("BOOL", "NULL"):
            return 1
        if tag == "SS":
            return sum(_utf8(v) for v in value)
        if tag == "NS":
            return sum(_number_size(v) for v in value)
        if tag == "BS":
            return sum(len(_binary(v)) for v in value)
        if tag == "L":
            return 3 + sum(1 + _value_size(v) for v in value)
        if tag == "M":
            return 3 + sum(1 + _utf8(k) + _value_size(v) for k, v in value.items())
    except (AttributeError, TypeError, ValueError, RecursionError):
        pass
    return _utf8(repr(av))


def _number_size(text: Any) -> int:
    digits = str(text).lstrip("+-").lower().split("e")[0].replace(".", "").strip("0")
    return (len(digits) + 1) // 2 + 1
