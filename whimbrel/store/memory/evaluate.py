"""Evaluates parsed expressions (:mod:`whimbrel.store.memory.parse`) on one item, as
DynamoDB does: conditions to True/False, updates to the new item, projections to the
part of the item asked for."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from whimbrel.store.memory.parse import Update
from whimbrel.store.memory.values import (
    attr_size,
    copy_value,
    invalid,
    number,
    number_text,
    same,
    sort_key,
)

__all__ = ["apply_update", "matches", "project", "resolve"]

Path = tuple[str | int, ...]


def resolve(item: Mapping[str, Any] | None, path: Path) -> dict[str, Any] | None:
    """The value at ``path`` in ``item``; None where the path leads nowhere."""
    if item is None:
        return None
    current: Any = item.get(path[0]) if isinstance(path[0], str) else None
    for part in path[1:]:
        if current is None:
            return None
        if isinstance(part, int):
            items = current.get("L")
            current = items[part] if items is not None and part < len(items) else None
        else:
            members = current.get("M")
            current = members.get(part) if members is not None else None
    return current  # type: ignore[no-any-return]


def _operand(item: Mapping[str, Any] | None, node: tuple[Any, ...]) -> dict[str, Any] | None:
    kind = node[0]
    if kind == "value":
        return node[1]  # type: ignore[no-any-return]
    if kind == "path":
        return resolve(item, node[1])
    if kind == "size":
        value = resolve(item, node[1])
        if value is None:
            return None
        tag, raw = next(iter(value.items()))
        if tag == "S":
            return {"N": str(len(raw.encode()))}
        if tag in ("B", "SS", "NS", "BS", "L", "M"):
            if tag == "B":
                return {"N": str(attr_size(value))}
            return {"N": str(len(raw))}
        return None
    raise invalid(f"Invalid ConditionExpression: unexpected operand {kind}")


def _ordered(a: dict[str, Any] | None, b: dict[str, Any] | None) -> tuple[Any, Any] | None:
    if a is None or b is None:
        return None
    ka, kb = next(iter(a)), next(iter(b))
    if ka != kb or ka not in ("S", "N", "B"):
        return None
    return sort_key(a), sort_key(b)


def _compare(op: str, a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    if op == "=":
        return a is not None and b is not None and same(a, b)
    if op == "<>":
        # A missing attribute differs from any value (DynamoDB: the condition holds).
        return a is None or b is None or not same(a, b)
    pair = _ordered(a, b)
    if pair is None:
        return False
    x, y = pair
    if op == "<":
        return bool(x < y)
    if op == "<=":
        return bool(x <= y)
    if op == ">":
        return bool(x > y)
    return bool(x >= y)


def _function(item: Mapping[str, Any] | None, name: str, args: list[Any]) -> bool:
    value = resolve(item, args[0][1])
    if name == "attribute_exists":
        return value is not None
    if name == "attribute_not_exists":
        return value is None
    if value is None:
        return False
    other = _operand(item, args[1])
    if other is None:
        return False
    tag, raw = next(iter(value.items()))
    if name == "attribute_type":
        return bool(tag == other.get("S"))
    otag, oraw = next(iter(other.items()))
    if name == "begins_with":
        if tag != otag or tag not in ("S", "B"):
            return False
        if tag == "B":
            return bytes(sort_key(value)).startswith(bytes(sort_key(other)))
        return bool(raw.startswith(oraw))
    # contains
    if tag == "S":
        return otag == "S" and oraw in raw
    if tag in ("SS", "NS", "BS"):
        if otag != tag[0]:
            return False
        return any(same({otag: member}, other) for member in raw)
    if tag == "L":
        return any(same(member, other) for member in raw)
    return False


def matches(item: Mapping[str, Any] | None, tree: tuple[Any, ...] | None) -> bool:
    """Whether ``item`` (None: no item) satisfies the condition ``tree``."""
    if tree is None:
        return True
    kind = tree[0]
    if kind == "and":
        return matches(item, tree[1]) and matches(item, tree[2])
    if kind == "or":
        return matches(item, tree[1]) or matches(item, tree[2])
    if kind == "not":
        return not matches(item, tree[1])
    if kind == "cmp":
        return _compare(tree[1], _operand(item, tree[2]), _operand(item, tree[3]))
    if kind == "between":
        value, low, high = (_operand(item, n) for n in tree[1:])
        return _compare(">=", value, low) and _compare("<=", value, high)
    if kind == "in":
        value = _operand(item, tree[1])
        return value is not None and any(same(value, _operand(item, n)) for n in tree[2])
    return _function(item, tree[1], tree[2])


# -- updates ---------------------------------------------------------------------------

def _missing_operand() -> Exception:
    return invalid("The provided expression refers to an attribute that does not exist in "
                   "the item")


def _wrong_type() -> Exception:
    return invalid("An operand in the update expression has an incorrect data type")


def _set_value(item: Mapping[str, Any], node: tuple[Any, ...]) -> dict[str, Any]:
    kind = node[0]
    if kind == "value":
        return node[1]  # type: ignore[no-any-return]
    if kind == "path":
        value = resolve(item, node[1])
        if value is None:
            raise _missing_operand()
        return copy_value(value)  # type: ignore[no-any-return]
    if kind == "if_not_exists":
        existing = resolve(item, node[1])
        return copy_value(existing) if existing is not None else _set_value(item, node[2])
    if kind == "list_append":
        first, second = _set_value(item, node[1]), _set_value(item, node[2])
        if "L" not in first or "L" not in second:
            raise _wrong_type()
        return {"L": [*first["L"], *second["L"]]}
    if kind in ("+", "-"):
        first, second = _set_value(item, node[1]), _set_value(item, node[2])
        if "N" not in first or "N" not in second:
            raise _wrong_type()
        a, b = Decimal(first["N"]), Decimal(second["N"])
        return {"N": number_text(number(a + b if kind == "+" else a - b))}
    raise invalid(f"Invalid UpdateExpression: {kind} is not allowed here")


def _parent(item: dict[str, Any], path: Path) -> Any:
    """The map or list holding the last element of ``path`` (ValidationException when the
    path to it does not exist)."""
    container: Any = item
    for part in path[:-1]:
        value = (container.get(part) if isinstance(container, dict) else
                 container[part] if isinstance(part, int) and part < len(container) else None)
        if isinstance(part, int) != isinstance(container, list) or value is None:
            raise invalid("The document path provided in the update expression is invalid "
                          "for update")
        tag = next(iter(value))
        container = value.get("M") if tag == "M" else value.get("L") if tag == "L" else None
        if container is None:
            raise invalid("The document path provided in the update expression is invalid "
                          "for update")
    last = path[-1]
    if isinstance(last, int) != isinstance(container, list):
        raise invalid("The document path provided in the update expression is invalid for "
                      "update")
    return container


def _put(item: dict[str, Any], path: Path, value: dict[str, Any]) -> None:
    container = _parent(item, path)
    last = path[-1]
    if isinstance(last, int):
        if last < len(container):
            container[last] = value
        else:
            container.append(value)  # past the end: appended, as DynamoDB does
    else:
        container[last] = value


def apply_update(old: Mapping[str, Any] | None, update: Update) -> dict[str, Any]:
    """The item after ``update`` (every operand read from the item as it was)."""
    base: dict[str, Any] = copy_value(dict(old or {}))
    values = [(path, _set_value(base, node)) for path, node in update.sets]
    adds: list[tuple[Path, dict[str, Any]]] = []
    for path, delta in update.adds:
        current = resolve(base, path)
        tag = next(iter(delta))
        if tag == "N":
            if current is not None and "N" not in current:
                raise _wrong_type()
            start = Decimal(current["N"]) if current is not None else Decimal(0)
            adds.append((path, {"N": number_text(number(start + Decimal(delta["N"])))}))
        elif tag in ("SS", "NS", "BS"):
            if current is not None and tag not in current:
                raise _wrong_type()
            members = list(current[tag]) if current is not None else []
            for member in delta[tag]:
                if not any(same({tag[0]: m}, {tag[0]: member}) for m in members):
                    members.append(member)
            adds.append((path, {tag: members}))
        else:
            raise _wrong_type()
    deletes: list[tuple[Path, dict[str, Any] | None]] = []
    for path, gone in update.deletes:
        current = resolve(base, path)
        tag = next(iter(gone))
        if tag not in ("SS", "NS", "BS") or (current is not None and tag not in current):
            raise _wrong_type()
        if current is None:
            continue
        left = [m for m in current[tag]
                if not any(same({tag[0]: m}, {tag[0]: g}) for g in gone[tag])]
        deletes.append((path, {tag: left} if left else None))
    for path, value in values + adds:
        _put(base, path, value)
    removals: list[Path] = [p for p, v in deletes if v is None]
    for path, left_set in deletes:
        if left_set is not None:
            _put(base, path, left_set)
    # Remove list elements from the highest index down, so earlier indexes still hold.
    for path in sorted([*update.removes, *removals], key=_removal_order, reverse=True):
        container = _parent(base, path)  # a nested path must lead somewhere
        last = path[-1]
        if isinstance(last, int):
            if last < len(container):
                del container[last]
        else:
            container.pop(last, None)
    return base


def _removal_order(path: Path) -> tuple[Any, ...]:
    return tuple((1, p) if isinstance(p, int) else (0, p) for p in path)


def project(item: Mapping[str, Any], paths: list[Path] | None) -> dict[str, Any]:
    """The parts of ``item`` the projection ``paths`` name (lists compacted)."""
    if paths is None:
        return copy_value(dict(item))  # type: ignore[no-any-return]
    out: dict[str, Any] = {}
    for path in paths:
        value = resolve(item, path)
        if value is None:
            continue
        if len(path) == 1:
            out[str(path[0])] = copy_value(value)
            continue
        top = path[0]
        holder = out.setdefault(str(top), _shell(item[str(top)]))
        for depth in range(1, len(path) - 1):
            holder = _child(holder, path[depth], resolve(item, path[:depth + 1]))
        _store(holder, path[-1], copy_value(value))
    projected: dict[str, Any] = _compact(out)
    return projected


def _shell(value: Mapping[str, Any]) -> dict[str, Any]:
    return {"M": {}} if "M" in value else {"L": {}}


def _child(holder: dict[str, Any], part: str | int, source: Any) -> dict[str, Any]:
    members = holder["M"] if "M" in holder else holder["L"]
    if part not in members:
        members[part] = _shell(source)
    return members[part]  # type: ignore[no-any-return]


def _store(holder: dict[str, Any], part: str | int, value: Any) -> None:
    (holder["M"] if "M" in holder else holder["L"])[part] = value


def _compact(value: Any) -> Any:
    """Lists built as {index: value} during projection become lists in index order."""
    if isinstance(value, dict):
        if "L" in value and isinstance(value["L"], dict):
            return {"L": [_compact(value["L"][i]) for i in sorted(value["L"])]}
        return {k: _compact(v) for k, v in value.items()}
    return value
