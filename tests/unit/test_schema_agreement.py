"""The schema is declared once (``TableSpec.attributes`` in whimbrel/store/specs.py); the
records, the keys and indexes, the table creation requests and the codec must agree with
it. No I/O."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

import pytest

from whimbrel.contract.records import (
    ActivityRecord,
    Change,
    DefinitionRecord,
    EventRecord,
    LeaseRecord,
    RejectionRecord,
    RequestRecord,
    SignalRecord,
    WorkflowRecord,
)
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.store import specs
from whimbrel.store.codec import (
    activity_record,
    decode_fields,
    encode_fields,
    record_item,
    to_ddb,
    workflow_record,
)

#: Each record and the table it is stored in.
RECORDS: list[tuple[type, specs.TableSpec]] = [
    (WorkflowRecord, specs.WORKFLOW_EXEC),
    (ActivityRecord, specs.ACTIVITY_EXEC),
    (RequestRecord, specs.WORKFLOW_REQUEST),
    (EventRecord, specs.ACTIVITY_EVENT),
    (DefinitionRecord, specs.WORKFLOW_DEFINITION),
    (RejectionRecord, specs.REJECTION),
    (SignalRecord, specs.table_spec("signal")),
    (LeaseRecord, specs.table_spec("lease")),
]

#: Attributes the store writes that no record field carries, and why.
STORE_ONLY = {
    "workflow_exec": {"name_state", "state_key"},  # listing index keys, derived from the state
    "workflow_definition": {"catalog", "expires_epoch"},  # catalog index key; TTL
    # written by the intake's marking; input_ref: a raw row's large input (issue 27)
    "workflow_request": {"result_state", "input_ref"},
    "activity_event": {"expires_epoch", "outcome", "processed_epoch", "result_state",
                       "reason", "error_type", "output_ref"},
    "activity_exec_dependency": {"dependency_key", "upstream", "expires_epoch"},
    "lease": {"expires_epoch"},  # TTL, never set on a lease
    "notification": {"event_id", "detail_type", "workflow_exec_id", "status", "attempts",
                     "claimed_epoch", "sent_epoch", "expires_epoch"},
}
#: Record fields that are not stored as attributes.
NOT_STORED = {"EventRecord": {"extra"}}


def _kinds_for(annotation: Any) -> set[str]:
    """The schema kinds a record field of this type may be stored as."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation = args[0]
    if annotation is bool:
        return {"BOOL"}
    if annotation is int:
        return {"I"}
    if annotation is float:
        return {"N"}
    if annotation is str:
        return {"S", "J"}
    if annotation in (ActivityState, WorkflowState):
        return {"S"}
    if typing.get_origin(annotation) is tuple:
        inner = typing.get_args(annotation)[0]
        return {"H"} if inner is Change else {"SL"}
    raise AssertionError(f"no schema kind for {annotation!r}")


@pytest.mark.parametrize("spec", specs.TABLES, ids=lambda s: s.logical_name)
def test_keys_indexes_and_ttl_are_declared_with_their_types(spec: specs.TableSpec) -> None:
    for key in spec.attribute_definitions():
        kind = spec.kind(key.name)
        assert (kind in ("N", "I")) == (key.type == "N"), (spec.logical_name, key, kind)
        assert kind in ("S", "N", "I"), "a key is text or a number"
    for index in spec.indexes:
        for name in index.non_key_attributes:
            assert name in spec.attributes, (spec.logical_name, index.name, name)
    if spec.ttl_attribute:
        assert spec.kind(spec.ttl_attribute) == "N"
    request = specs.create_table_request(spec, "p_")
    declared = {d["AttributeName"]: d["AttributeType"] for d in request["AttributeDefinitions"]}
    assert all((spec.kind(n) in ("N", "I")) == (t == "N") for n, t in declared.items())


@pytest.mark.parametrize(("record", "spec"), RECORDS, ids=lambda x: getattr(x, "__name__", ""))
def test_every_record_field_is_declared_with_a_matching_kind(record: type,
                                                             spec: specs.TableSpec) -> None:
    hints = typing.get_type_hints(record)
    skipped = NOT_STORED.get(record.__name__, set())
    for f in dataclasses.fields(record):
        if f.name in skipped:
            continue
        assert f.name in spec.attributes, f"{record.__name__}.{f.name} not in the schema"
        assert spec.kind(f.name) in _kinds_for(hints[f.name]), (record.__name__, f.name)
    fields = {f.name for f in dataclasses.fields(record)}
    extra = set(spec.attributes) - fields - STORE_ONLY.get(spec.logical_name, set())
    assert not extra, f"{spec.logical_name} declares attributes no record or store uses: {extra}"


def test_tables_without_a_record_declare_exactly_what_the_store_writes() -> None:
    for spec in (specs.table_spec("notification"), specs.ACTIVITY_EXEC_DEPENDENCY):
        assert set(spec.attributes) == STORE_ONLY[spec.logical_name]


def _full(record: type) -> Any:
    """A record with every field set to a value of its type."""
    hints = typing.get_type_hints(record)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        kinds = _kinds_for(hints[f.name]) if f.name != "extra" else set()
        if f.name == "state":
            values[f.name] = (ActivityState.RUNNING if record is ActivityRecord
                              else WorkflowState.RUNNING)
        elif "H" in kinds:
            values[f.name] = (Change("RUNNING", 1.5, "me"), Change("READY", 2.0, None))
        elif "SL" in kinds:
            values[f.name] = ("alice", "bob")
        elif "BOOL" in kinds:
            values[f.name] = True
        elif "I" in kinds:
            values[f.name] = 7
        elif "N" in kinds:
            values[f.name] = 1.25
        elif f.name == "extra":
            values[f.name] = {}
        else:
            values[f.name] = '{"x":1}' if "J" in kinds and f.name != "error" else f"v-{f.name}"
    return record(**values)


@pytest.mark.parametrize(("record", "spec"), RECORDS, ids=lambda x: getattr(x, "__name__", ""))
def test_the_codec_writes_only_declared_attributes_and_reads_them_back(
        record: type, spec: specs.TableSpec) -> None:
    full = _full(record)
    item = encode_fields(full, skip=NOT_STORED.get(record.__name__, ()))
    assert set(item) <= set(spec.attributes)
    names = [f.name for f in dataclasses.fields(record)
             if f.name not in NOT_STORED.get(record.__name__, set())]
    back = decode_fields(spec, item, names)
    assert back == {n: getattr(full, n) for n in names}


def test_hot_records_round_trip_through_their_codec_functions() -> None:
    act = _full(ActivityRecord)
    assert activity_record(record_item(act)) == act
    wf = _full(WorkflowRecord)
    assert workflow_record(record_item(wf)) == wf


@pytest.mark.parametrize(("native", "text"), [
    ({"M": {"rows": {"N": "42"}}}, '{"rows":42}'),
    ({"L": [{"S": "a"}, {"N": "1.5"}, {"BOOL": False}, {"NULL": True}]}, '["a",1.5,false,null]'),
    ({"N": "3"}, "3"),
    ({"S": '{"already":"json"}'}, '{"already":"json"}'),
])
def test_a_payload_reads_back_as_json_text_whatever_a_client_stored(native: Any,
                                                                    text: str) -> None:
    assert decode_fields(specs.WORKFLOW_REQUEST, {"input": native}, ["input"]) == \
        {"input": text}


def test_every_kind_in_the_schema_is_one_the_codec_knows() -> None:
    for spec in specs.TABLES:
        assert set(spec.attributes.values()) <= set(specs.ATTR_KINDS), spec.logical_name
    with pytest.raises(ValueError, match="unknown attribute kind"):
        specs.attributes("x:Q")
    assert to_ddb(True) == {"BOOL": True}
