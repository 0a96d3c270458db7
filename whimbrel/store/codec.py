"""The store's one DynamoDB-JSON codec: records to items and back, and the expressions
of its writes.

What each attribute holds comes from the schema in :mod:`whimbrel.store.specs`
(``TableSpec.attributes``); ``tests/unit/test_schema_agreement.py`` checks that every
record field, key, index key and model attribute agrees with it. A payload attribute
(kind ``J``) may hold JSON text (what Whimbrel writes) or a native DynamoDB value (what
docs/simple-api.md lets a raw client write); either reads back as JSON text.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

from whimbrel.contract import ddbjson
from whimbrel.contract.ddbjson import from_ddb, number
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.records import REMOVE, ActivityRecord, Change, WorkflowRecord
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.store import spec_core

AttrValue = dict[str, Any]
Item = dict[str, AttrValue]

__all__ = ["Expression", "Item", "activity_record", "decode_fields", "encode_fields",
           "from_ddb", "number", "payload_text", "record_item", "to_ddb", "workflow_record"]


def to_ddb(value: Any) -> AttrValue:
    """A Python value (plain data, or a history :class:`Change`) as DynamoDB JSON."""
    if isinstance(value, Change):
        m: Item = {"state": {"S": value.state}, "at": {"N": number(value.at)}}
        if value.by is not None:
            m["by"] = {"S": value.by}
        return {"M": m}
    if isinstance(value, list | tuple) and any(isinstance(v, Change) for v in value):
        return {"L": [to_ddb(v) for v in value]}
    return ddbjson.to_ddb(value)


def _history(raw: Any) -> tuple[Change, ...]:
    out = []
    for h in raw or ():
        if isinstance(h, Mapping):
            by = h.get("by")
            out.append(Change(str(h.get("state")), float(h.get("at") or 0.0),
                              None if by is None else str(by)))
    return tuple(out)


_ACTIVITY_FIELDS = tuple(f.name for f in dataclasses.fields(ActivityRecord))
_WORKFLOW_FIELDS = tuple(f.name for f in dataclasses.fields(WorkflowRecord))


def payload_text(av: AttrValue) -> str | None:
    """A payload attribute as JSON text: text as stored, a native value as its JSON."""
    if "S" in av:
        text: str = av["S"]
        return text
    value = from_ddb(av)
    if value is None:
        return None
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def decode_value(kind: str, av: AttrValue) -> Any:
    """One attribute value as the schema's ``kind`` says (None: absent or NULL)."""
    if kind == "J":
        return payload_text(av)
    value = from_ddb(av)
    if value is None:
        return None
    if kind == "H":
        return _history(value)
    if kind == "SL":
        return tuple(str(v) for v in value)
    if kind == "I":
        return int(value)
    if kind == "N":
        return float(value)
    if kind == "BOOL":
        return bool(value)
    return value


def decode_fields(spec: spec_core.TableSpec, item: Mapping[str, AttrValue],
                  fields: Iterable[str]) -> dict[str, Any]:
    """The ``fields`` an item of ``spec``'s table holds, decoded by the schema (absent
    and NULL ones left out)."""
    out: dict[str, Any] = {}
    for name in fields:
        av = item.get(name)
        if av is None:
            continue
        value = decode_value(spec.attributes.get(name, "S"), av)
        if value is not None:
            out[name] = value
    return out


def encode_fields(record: Any, *, skip: Iterable[str] = ()) -> Item:
    """The item of a record (a dataclass): None fields and empty histories left out."""
    skipped = set(skip)
    out: Item = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if f.name in skipped or value is None or (f.name == "history" and not value):
            continue
        out[f.name] = to_ddb(value)
    return out


def activity_record(item: Mapping[str, AttrValue]) -> ActivityRecord:
    """An ``activity_exec`` or ``map_item`` item (whole, or as an index projects it) as
    a record."""
    data = decode_fields(spec_core.ACTIVITY_EXEC, item, _ACTIVITY_FIELDS)
    if "workflow_exec_id" not in data and "activity_exec_id" in data:
        # An index entry of map_item projects its keys, which do not hold the run's id
        # as such; the attempt's id does.
        data["workflow_exec_id"] = parse_activity_exec_id(data["activity_exec_id"]) \
            .workflow_exec_id
    state = data.pop("state", None)
    data.setdefault("activity_name", "")
    data.setdefault("workflow_name", "")
    data.setdefault("attempt", 0)
    return ActivityRecord(state=ActivityState(state) if state else None, **data)


def workflow_record(item: Mapping[str, AttrValue]) -> WorkflowRecord:
    data = decode_fields(spec_core.WORKFLOW_EXEC, item, _WORKFLOW_FIELDS)
    return WorkflowRecord(
        workflow_exec_id=data.pop("workflow_exec_id"),
        workflow_name=data.pop("workflow_name", ""),
        version=data.pop("version", 0),
        state=WorkflowState(data.pop("state")),
        **data,
    )


def record_item(record: ActivityRecord | WorkflowRecord) -> Item:
    """The whole item for a new record (None fields are left out)."""
    return encode_fields(record)


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

    def more_than(self, attr: str, value: Any) -> str:
        return f"{self.name(attr)} > {self.value(value)}"

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
