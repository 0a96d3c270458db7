"""DynamoDB attribute values as the twin handles them: validation, number
normalisation, ordering, equality and sizes (DynamoDB's item-size rules)."""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from decimal import Context, Decimal, InvalidOperation
from typing import Any

__all__ = ["TYPES", "DynamoError", "attr_size", "copy_value", "item_size", "key_bytes",
           "number", "same", "sort_key", "validate_item", "validate_value"]

#: The attribute value types, by their DynamoDB JSON tag.
TYPES = ("S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS")
#: Wide enough that normalising never rounds what DynamoDB would keep or refuse.
_WIDE = Context(prec=400)
#: The largest item DynamoDB accepts (names and values, bytes).
MAX_ITEM_BYTES = 400 * 1024


class DynamoError(Exception):
    """A DynamoDB error the twin answers with: ``code`` as AWS spells it."""

    def __init__(self, code: str, message: str, *, item: Mapping[str, Any] | None = None,
                 ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.item = item


def invalid(message: str) -> DynamoError:
    return DynamoError("ValidationException", message)


def tag(av: Mapping[str, Any]) -> str:
    """The type tag of one attribute value (ValidationException: not exactly one)."""
    if not isinstance(av, Mapping) or len(av) != 1:
        raise invalid("Supplied AttributeValue has more than one datatypes set, must contain "
                      "exactly one of the supported datatypes")
    (kind,) = av
    if kind not in TYPES:
        raise invalid(f"Supplied AttributeValue is empty, must contain exactly one of the "
                      f"supported datatypes (got {kind!r})")
    return str(kind)


def number(text: Any) -> Decimal:
    """A number attribute's value (ValidationException: not a DynamoDB number)."""
    try:
        value = Decimal(str(text))
    except InvalidOperation:
        raise invalid(f"A value provided cannot be converted into a number: {text!r}") from None
    if not value.is_finite():
        raise invalid("A value provided cannot be converted into a number")
    if value and len(value.normalize(_WIDE).as_tuple().digits) > 38:
        raise invalid("Attempting to store more than 38 significant digits in a Number")
    if value and not (Decimal("1E-130") <= abs(value) < Decimal("1E126")):
        raise invalid("Number overflow. Attempting to store a number with magnitude larger "
                      "than supported range")
    return value


def number_text(value: Decimal) -> str:
    """A number as DynamoDB returns it: no exponent, no trailing zeros."""
    if not value:
        return "0"
    return format(value.normalize(_WIDE), "f")


def _binary(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    try:
        return base64.b64decode(str(value), validate=True)
    except ValueError:
        raise invalid("Invalid Binary value: not base64") from None


def validate_value(av: Mapping[str, Any], name: str = "") -> dict[str, Any]:
    """``av`` checked and normalised (numbers as DynamoDB stores them)."""
    kind = tag(av)
    raw = av[kind]
    if kind == "N":
        return {"N": number_text(number(raw))}
    if kind in ("SS", "NS", "BS"):
        if not isinstance(raw, list) or not raw:
            label = {"SS": "string", "NS": "number", "BS": "binary"}[kind]
            raise invalid(f"One or more parameter values were invalid: An {label} set  may "
                          "not be empty")
        members = [number_text(number(v)) for v in raw] if kind == "NS" else list(raw)
        seen = {Decimal(v) for v in members} if kind == "NS" else set(members)
        if len(seen) != len(members):
            raise invalid(f"One or more parameter values were invalid: Input collection "
                          f"{raw} contains duplicates.")
        return {kind: members}
    if kind == "M":
        if not isinstance(raw, Mapping):
            raise invalid(f"Invalid map value for {name or 'attribute'}")
        return {"M": {k: validate_value(v, k) for k, v in raw.items()}}
    if kind == "L":
        if not isinstance(raw, list):
            raise invalid(f"Invalid list value for {name or 'attribute'}")
        return {"L": [validate_value(v, name) for v in raw]}
    if kind == "NULL" and raw is not True:
        raise invalid("One or more parameter values were invalid: Null attribute value "
                      "types must have the value of true")
    if kind == "BOOL" and not isinstance(raw, bool):
        raise invalid("Invalid BOOL value")
    if kind == "S" and not isinstance(raw, str):
        raise invalid("Invalid String value")
    if kind == "B":
        _binary(raw)
    return {kind: raw}


def validate_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item's attributes checked and normalised; too large: ValidationException."""
    if not isinstance(item, Mapping):
        raise invalid("Item must be a map of attribute names to values")
    out: dict[str, Any] = {}
    for name, av in item.items():
        if not name:
            raise invalid("One or more parameter values were invalid: An AttributeValue may "
                          "not contain an empty attribute name")
        out[name] = validate_value(av, name)
    if item_size(out) > MAX_ITEM_BYTES:
        raise invalid("Item size has exceeded the maximum allowed size")
    return out


def copy_value(value: Any) -> Any:
    """A deep copy of DynamoDB JSON (much cheaper than ``copy.deepcopy``)."""
    if isinstance(value, dict):
        return {k: copy_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_value(v) for v in value]
    return value


def _number_size(text: str) -> int:
    digits = text.lstrip("-").replace(".", "").strip("0")
    return math.ceil(len(digits) / 2) + 1 if digits else 1


def attr_size(av: Mapping[str, Any]) -> int:
    """Bytes of one value by DynamoDB's rules (name not included)."""
    kind, raw = next(iter(av.items()))
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        return _number_size(raw)
    if kind == "B":
        return len(_binary(raw))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(v.encode()) for v in raw)
    if kind == "NS":
        return sum(_number_size(v) for v in raw)
    if kind == "BS":
        return sum(len(_binary(v)) for v in raw)
    if kind == "L":
        return 3 + sum(1 + attr_size(v) for v in raw)
    return 3 + sum(1 + len(k.encode()) + attr_size(v) for k, v in raw.items())


def item_size(item: Mapping[str, Any] | None) -> int:
    """Bytes of an item: each attribute's name and value."""
    if not item:
        return 0
    return sum(len(name.encode()) + attr_size(av) for name, av in item.items())


def sort_key(av: Mapping[str, Any]) -> Any:
    """Ordering of a key attribute value: numbers numerically, strings and binaries by
    their bytes (UTF-8 for strings), as DynamoDB orders sort keys."""
    kind, raw = next(iter(av.items()))
    if kind == "N":
        return Decimal(raw)
    if kind == "B":
        return _binary(raw)
    return str(raw).encode()


def key_bytes(av: Mapping[str, Any]) -> Any:
    """A hashable identity of a key attribute value."""
    kind, raw = next(iter(av.items()))
    if kind == "N":
        return ("N", Decimal(raw))
    if kind == "B":
        return ("B", _binary(raw))
    return (kind, raw)


def same(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """DynamoDB equality: same type and value (numbers by value, sets unordered)."""
    if a is None or b is None:
        return a is b
    ka, va = next(iter(a.items()))
    kb, vb = next(iter(b.items()))
    if ka != kb:
        return False
    if ka == "N":
        return Decimal(va) == Decimal(vb)
    if ka == "B":
        return _binary(va) == _binary(vb)
    if ka == "NS":
        return {Decimal(v) for v in va} == {Decimal(v) for v in vb}
    if ka == "BS":
        return {_binary(v) for v in va} == {_binary(v) for v in vb}
    if ka == "SS":
        return set(va) == set(vb)
    if ka == "L":
        return len(va) == len(vb) and all(same(x, y) for x, y in zip(va, vb, strict=True))
    if ka == "M":
        return va.keys() == vb.keys() and all(same(va[k], vb[k]) for k in va)
    return bool(va == vb)


def items_equal(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
