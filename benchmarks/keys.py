"""Which partition-key values a DynamoDB request touches, table and index alike.

The billing proxy (:mod:`benchmarks.billing`) charges every unit to a partition-key value:
a base-table write to the item's hash key, an index entry's write to the index's hash key
computed from the item image and the index definitions of ``whimbrel.store.specs``
(sparse: an entry exists only when every key attribute of the index is present; an
update that changes the index key deletes the old entry and writes the new one, a unit
each), a read to the key it names. The throttling mode (:mod:`benchmarks.throttle`)
asks the same functions, before a request is sent, which buckets it would draw on.
"""

from __future__ import annotations

import re
from typing import Any

from whimbrel.store.specs import IndexSpec, TableSpec

#: A category: the table's logical name, or ``table.index``.
Cat = str
#: (category, partition-key value) -> units.
KeyUnits = dict[tuple[Cat, str], float]

_ASSIGN = re.compile(r"^\s*([#\w.]+)\s*=\s*(:\w+)\s*$")


def scalar(value: dict[str, Any] | None) -> str:
    """A key attribute's value as text (``?`` when missing)."""
    return str(next(iter(value.values()))) if value else "?"


def entry(idx: IndexSpec, image: dict[str, Any] | None) -> tuple[str, tuple[str, ...]] | None:
    """The index entry ``image`` has in ``idx``: (hash value, full key), or None (sparse)."""
    keys = [k.name for k in (idx.hash_key, idx.range_key) if k]
    if not image or not all(k in image for k in keys):
        return None
    return scalar(image[idx.hash_key.name]), tuple(scalar(image[k]) for k in keys)


def write_keys(spec: TableSpec, before: dict[str, Any] | None,
               after: dict[str, Any] | None, base_units: float) -> tuple[KeyUnits, float]:
    """The units of one item write by (category, partition-key value), and the index
    units in all (1 per entry written or deleted, 1 for a projected attribute change)."""
    name = spec.logical_name
    image = after or before or {}
    out: KeyUnits = {(name, scalar(image.get(spec.hash_key.name))): base_units}
    total = 0.0
    for idx in spec.indexes:
        cat = f"{name}.{idx.name}"
        old, new = entry(idx, before), entry(idx, after)
        if old and new and old[1] == new[1]:  # the same entry: billed if a projection moved
            if any((before or {}).get(a) != (after or {}).get(a)
                   for a in idx.non_key_attributes):
                out[(cat, new[0])] = out.get((cat, new[0]), 0.0) + 1.0
                total += 1.0
            continue
        for e in (old, new):  # removed, added, or moved: a unit per entry, on its key
            if e:
                out[(cat, e[0])] = out.get((cat, e[0]), 0.0) + 1.0
                total += 1.0
    return out, total


def _name(token: str, names: dict[str, str]) -> str:
    return names.get(token, token)


def assignments(params: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The plain ``SET a = :v`` assignments and the ``REMOVE`` names of an UpdateItem
    (others, like ``list_append``, cannot change a key attribute of ours)."""
    expr = str(params.get("UpdateExpression") or "")
    names = params.get("ExpressionAttributeNames") or {}
    values = params.get("ExpressionAttributeValues") or {}
    sets: dict[str, Any] = {}
    removes: list[str] = []
    parts = re.split(r"\b(SET|REMOVE|ADD|DELETE)\b", expr, flags=re.I)
    for verb, body in zip(parts[1::2], parts[2::2], strict=True):
        items = _top_level(body)
        if verb.upper() == "SET":
            for item in items:
                if m := _ASSIGN.match(item):
                    sets[_name(m.group(1), names)] = values.get(m.group(2))
        elif verb.upper() == "REMOVE":
            removes += [_name(i.strip(), names) for i in items]
    return sets, removes


def _top_level(body: str) -> list[str]:
    """``body`` split at the commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in body:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [x for x in (*out, cur) if x.strip()]


def predicted_after(op: str, params: dict[str, Any],
                    before: dict[str, Any] | None) -> dict[str, Any] | None:
    """The item image a write would leave (as far as its key attributes go)."""
    if op == "PutItem":
        return dict(params.get("Item") or {})
    if op == "DeleteItem":
        return None
    sets, removes = assignments(params)
    after = {**(before or params.get("Key") or {}), **params.get("Key", {})}
    after.update({k: v for k, v in sets.items() if v is not None})
    for k in removes:
        after.pop(k, None)
    return after


def query_key(spec: TableSpec, params: dict[str, Any]) -> tuple[Cat, str]:
    """The (category, partition-key value) a Query reads: from its key condition."""
    index = params.get("IndexName")
    hash_name = spec.index(index).hash_key.name if index else spec.hash_key.name
    cat = f"{spec.logical_name}.{index}" if index else spec.logical_name
    names = params.get("ExpressionAttributeNames") or {}
    values = params.get("ExpressionAttributeValues") or {}
    for part in re.split(r"\s+AND\s+", str(params.get("KeyConditionExpression") or ""),
                         flags=re.I):
        if (m := _ASSIGN.match(part.strip("() "))) and _name(m.group(1), names) == hash_name:
            return cat, scalar(values.get(m.group(2)))
    return cat, "?"
