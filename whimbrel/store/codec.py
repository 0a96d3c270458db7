"""Records to DynamoDB JSON and back, and the expressions of the hot writes.

The attribute names are the schema declared by the models in :mod:`whimbrel.store.models`
(a unit test checks that every name written here is declared there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from whimbrel.contract.records import REMOVE, ActivityRecord, Change, WorkflowRecord
from whimbrel.contract.states import ActivityState, WorkflowState

AttrValue = dict[str, Any]
Item = dict[str, AttrValue]


def number(value: float | int) -> str:
    if isinstance(value, bool):
        raise TypeError("a bool is not a number")
    if isinstance(value, int) or (float(value).is_integer() and abs(value) < 2**53):
        return str(int(value))
    return repr(float(value))


def to_ddb(value: Any) -> AttrValue:
    """A Python value as a DynamoDB attribute value."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, int | float):
        return {"N": number(value)}
    if isinstance(value, Change):
        m: Item = {"state": {"S": value.state}, "at": {"N": number(value.at)}}
        if value.by is not None:
            m["by"] = {"S": value.by}
        return {"M": m}
    if isinstance(value, Mapping):
        return {"M": {str(k): to_ddb(v) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return {"L": [to_ddb(v) for v in value]}
    raise TypeError(f"cannot store {type(value).__name__}")


def from_ddb(av: AttrValue) -> Any:
    """A DynamoDB attribute value as plain Python (numbers: int when integral)."""
    (tag, value), = av.items()
    if tag == "S":
        return value
    if tag == "N":
        text = str(value)
        return int(text) if text.lstrip("-").isdigit() else float(text)
    if tag == "BOOL":
        return bool(value)
    if tag == "NULL":
        return None
    if tag == "M":
        return {k: from_ddb(v) for k, v in value.items()}
    if tag == "L":
        return [from_ddb(v) for v in value]
    if tag in ("SS", "BS"):
        return sorted(value)
    if tag == "NS":
        return sorted(float(v) for v in value)
    raise ValueError(f"unknown DynamoDB type {tag}")


def _history(raw: Any) -> tuple[Change, ...]:
    out = []
    for h in raw or ():
        if isinstance(h, Mapping):
            by = h.get("by")
            out.append(Change(str(h.get("state")), float(h.get("at") or 0.0),
                              None if by is None else str(by)))
    return tuple(out)


_ACTIVITY_FIELDS = {f.name: f for f in dataclasses.fields(ActivityRecord)}
_WORKFLOW_FIELDS = {f.name: f for f in dataclasses.fields(WorkflowRecord)}
_INTS = frozenset({"attempt", "workflow_version", "version", "map_size", "redrive_count",
                   "retry_base", "redrive_ready", "retry_created"})
_FLOATS = frozenset(n for n, f in {**_ACTIVITY_FIELDS, **_WORKFLOW_FIELDS}.items()
                    if "float" in str(f.type))


def _plain_fields(item: Mapping[str, AttrValue], fields: Iterable[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in fields:
        av = item.get(name)
        if av is None:
            continue
        value = from_ddb(av)
        if value is None:
            continue
        if name == "history":
            value = _history(value)
        elif name == "approvers":
            value = tuple(str(v) for v in value)
        elif name in _INTS:
            value = int(value)
        elif name in _FLOATS:
            value = float(value)
        out[name] = value
    return out


def activity_record(item: Mapping[str, AttrValue]) -> ActivityRecord:
    """An ``activity_exec`` item (whole, or as an index projects it) as a record."""
    data = _plain_fields(item, _ACTIVITY_FIELDS)
    state = data.pop("state", None)
    data.setdefault("activity_name", "")
    data.setdefault("workflow_name", "")
    data.setdefault("attempt", 0)
    return ActivityRecord(state=ActivityState(state) if state else None, **data)


def workflow_record(item: Mapping[str, AttrValue]) -> WorkflowRecord:
    data = _plain_fields(item, _WORKFLOW_FIELDS)
    return WorkflowRecord(
        workflow_exec_id=data.pop("workflow_exec_id"),
        workflow_name=data.pop("workflow_name", ""),
        version=data.pop("version", 0),
        state=WorkflowState(data.pop("state")),
        **data,
    )


def record_item(record: ActivityRecord | WorkflowRecord) -> Item:
    """The whole item for a new record (None fields are left out)."""
    out: Item = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if value is None or (f.name == "history" and not value):
            continue
        out[f.name] = to_ddb(value)
    return out


class Expression:
    """Builds one UpdateExpression / ConditionExpression with placeholders."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, AttrValue] = {}

    def name(self, attr: str) -> str:
        key = f"#{attr}"
        self.names[key] = attr
        return key

    def value(self, value: Any) -> str:
        key = f":v{len(self.values)}"
        self.values[key] = to_ddb(value)
        return key

    def update(self, changes: Mapping[str, Any],
               append: Mapping[str, list[Any]] | None = None) -> str:
        sets = [f"{self.name(k)} = {self.value(v)}" for k, v in changes.items()
                if v is not REMOVE]
        for attr, items in (append or {}).items():
            n = self.name(attr)
            sets.append(f"{n} = list_append(if_not_exists({n}, {self.value([])}), "
                        f"{self.value(items)})")
        removes = [self.name(k) for k, v in changes.items() if v is REMOVE]
        expr = ""
        if sets:
            expr += "SET " + ", ".join(sets)
        if removes:
            expr += (" " if expr else "") + "REMOVE " + ", ".join(removes)
        return expr

    def equals(self, attr: str, value: Any) -> str:
        return f"{self.name(attr)} = {self.value(value)}"

    def one_of(self, attr: str, values: Iterable[Any]) -> str:
        placeholders = ", ".join(self.value(v) for v in values)
        return f"{self.name(attr)} IN ({placeholders})"

    def at_most(self, attr: str, value: Any) -> str:
        return f"{self.name(attr)} <= {self.value(value)}"

    def exists(self, attr: str) -> str:
        return f"attribute_exists({self.name(attr)})"

    def missing(self, attr: str) -> str:
        return f"attribute_not_exists({self.name(attr)})"

    def params(self, **extra: Any) -> dict[str, Any]:
        out = dict(extra)
        if self.names:
            out["ExpressionAttributeNames"] = self.names
        if self.values:
            out["ExpressionAttributeValues"] = self.values
        return out
