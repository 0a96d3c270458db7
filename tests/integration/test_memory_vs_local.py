"""The in-memory twin and DynamoDB Local answer the same random requests the same way:
random items, random condition and update expressions (Hypothesis), sent to both; the
outcome (done, condition lost, or refused) and the item after must agree."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from whimbrel.contract.errors import StoreError
from whimbrel.store.errors import ConditionLost
from whimbrel.store.memory import MemoryDynamoDB
from whimbrel.store.transport import open_transport

EXAMPLES = int(os.environ.get("WHIMBREL_TWIN_EXAMPLES", "300"))

NAMES = ("a", "b", "c", "d", "e")
numbers = st.integers(-5, 5).map(lambda n: {"N": str(n)})
strings = st.sampled_from(["", "x", "xy", "y"]).filter(bool).map(lambda s: {"S": s})
scalars = st.one_of(numbers, strings, st.booleans().map(lambda b: {"BOOL": b}))
values = st.one_of(
    scalars,
    st.lists(numbers, max_size=3).map(lambda v: {"L": v}),
    st.dictionaries(st.sampled_from(["p", "q"]), scalars, max_size=2).map(lambda m: {"M": m}),
    st.sets(st.sampled_from(["x", "y", "z"]), min_size=1).map(lambda s: {"SS": sorted(s)}),
)
items = st.dictionaries(st.sampled_from(NAMES), values, max_size=4)
paths = st.one_of(st.sampled_from([f"#{n}" for n in NAMES]),
                  st.sampled_from(["#c[0]", "#c[2]", "#d.p", "#d.q"]))
operands = st.one_of(paths, st.sampled_from([":v0", ":v1"]))


@st.composite
def conditions(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.sampled_from(["cmp", "fn", "between", "in", "size"]
                                + (["and", "or", "not"] if depth < 2 else [])))
    if kind == "cmp":
        return (f"{draw(operands)} {draw(st.sampled_from(['=', '<>', '<', '<=', '>', '>=']))}"
                f" {draw(operands)}")
    if kind == "fn":
        fn = draw(st.sampled_from(["attribute_exists", "attribute_not_exists", "begins_with",
                                   "contains", "attribute_type"]))
        if fn.startswith("attribute_") and fn != "attribute_type":
            return f"{fn}({draw(paths)})"
        if fn == "attribute_type":
            return f"attribute_type({draw(paths)}, :t)"
        return f"{fn}({draw(paths)}, {draw(operands)})"
    if kind == "between":
        return f"{draw(operands)} BETWEEN :v0 AND :v1"
    if kind == "in":
        return f"{draw(operands)} IN (:v0, :v1)"
    if kind == "size":
        return f"size({draw(paths)}) {draw(st.sampled_from(['=', '<', '>']))} :v0"
    if kind == "not":
        return f"NOT ({draw(conditions(depth + 1))})"
    joiner = " AND " if kind == "and" else " OR "
    return f"({draw(conditions(depth + 1))}){joiner}({draw(conditions(depth + 1))})"


@st.composite
def updates(draw: st.DrawFn) -> str:
    actions: list[str] = []
    for _ in range(draw(st.integers(1, 2))):
        target = draw(paths)
        kind = draw(st.sampled_from(["set", "plus", "ine", "append", "remove", "add"]))
        if kind == "set":
            actions.append(f"SET {target} = {draw(operands)}")
        elif kind == "plus":
            actions.append(f"SET {target} = {draw(operands)} + {draw(operands)}")
        elif kind == "ine":
            actions.append(f"SET {target} = if_not_exists({draw(paths)}, :v0)")
        elif kind == "append":
            actions.append(f"SET {target} = list_append({draw(operands)}, :l)")
        elif kind == "remove":
            actions.append(f"REMOVE {target}")
        else:
            actions.append(f"ADD {target} :v0")
    return " ".join(actions)


def _used(text: str, params: dict[str, Any]) -> dict[str, Any]:
    """Only the names and values ``text`` uses (both refuse unused ones)."""
    out = dict(params)
    names = {k: v for k, v in params["ExpressionAttributeNames"].items() if k in text}
    vals = {k: v for k, v in params["ExpressionAttributeValues"].items() if k in text}
    out.pop("ExpressionAttributeNames")
    out.pop("ExpressionAttributeValues")
    if names:
        out["ExpressionAttributeNames"] = names
    if vals:
        out["ExpressionAttributeValues"] = vals
    return out


TABLE = "twin_vs_local"
CREATE = {"TableName": TABLE, "BillingMode": "PAY_PER_REQUEST",
          "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
          "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}]}


@pytest.fixture(scope="module")
def pair(module_ddb_endpoint: str) -> Iterator[tuple[Any, MemoryDynamoDB]]:
    local = open_transport(endpoint_url=module_ddb_endpoint, kind="botocore")
    try:
        local.call("DeleteTable", {"TableName": TABLE})
    except StoreError:
        pass
    local.call("CreateTable", CREATE)
    twin = MemoryDynamoDB()
    twin.call("CreateTable", CREATE)
    yield local, twin
    local.call("DeleteTable", {"TableName": TABLE})


def _outcome(transport: Any, operation: str, params: dict[str, Any],
             key: dict[str, Any]) -> tuple[str, Any]:
    try:
        transport.call(operation, params)
    except ConditionLost as lost:
        return "lost", lost.item
    except StoreError as exc:
        return "refused", exc.aws_code
    item = transport.call("GetItem", {"TableName": TABLE, "Key": key,
                                      "ConsistentRead": True}).get("Item")
    return "done", item


def _normal(outcome: tuple[str, Any]) -> tuple[str, Any]:
    """Sets compare unordered."""
    kind, value = outcome
    if isinstance(value, dict):
        value = {k: ({t: sorted(v)} if t in ("SS", "NS") else {t: v})
                 for k, av in value.items() for t, v in av.items()}
    return kind, value


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(item=items, condition=conditions(), update=updates(), v0=values, v1=values,
       kind=st.sampled_from(["update", "put", "delete"]))
def test_the_twin_answers_as_dynamodb_local(pair: tuple[Any, MemoryDynamoDB],
                                            item: dict[str, Any], condition: str,
                                            update: str, v0: dict[str, Any],
                                            v1: dict[str, Any], kind: str) -> None:
    local, twin = pair
    key = {"pk": {"S": "k"}}
    for transport in (local, twin):
        transport.call("PutItem", {"TableName": TABLE, "Item": {**item, **key}})
    base: dict[str, Any] = {
        "TableName": TABLE, "ConditionExpression": condition,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ExpressionAttributeNames": {f"#{n}": n for n in NAMES},
        "ExpressionAttributeValues": {":v0": v0, ":v1": v1, ":t": {"S": "N"},
                                      ":l": {"L": [{"N": "9"}]}}}
    if kind == "update":
        params = _used(condition + " " + update, {**base, "Key": key,
                                                  "UpdateExpression": update})
        operation = "UpdateItem"
    elif kind == "put":
        params = _used(condition, {**base, "Key": key, "Item": {**key, "a": v0}})
        params.pop("Key")
        operation = "PutItem"
    else:
        params = _used(condition, {**base, "Key": key})
        operation = "DeleteItem"
    got_local = _normal(_outcome(local, operation, params, key))
    got_twin = _normal(_outcome(twin, operation, params, key))
    assert got_twin == got_local, (operation, params, item)
