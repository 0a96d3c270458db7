"""The twin's reads: GetItem, BatchGetItem, TransactGetItems, Query and Scan (key
conditions, filters, projections, paging, ``Select``) and the one PartiQL statement the
store sends (``select_in``: ``SELECT ... FROM table.index WHERE key IN [...]``)."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from whimbrel.store.memory.evaluate import matches, project
from whimbrel.store.memory.parse import Names, parse_condition, parse_projection
from whimbrel.store.memory.tables import Database, Index, Table, capacity
from whimbrel.store.memory.values import (
    DynamoError,
    invalid,
    item_size,
    sort_key,
    validate_value,
)

__all__ = ["READS"]

#: A Query or Scan page stops after reading this much (DynamoDB's 1 MB).
PAGE_BYTES = 1024 * 1024


def _read_units(size: int, consistent: bool) -> float:
    units = float(max(1, math.ceil(size / 4096)))
    return units if consistent else units / 2


def _names(params: Mapping[str, Any]) -> Names:
    return Names(params.get("ExpressionAttributeNames") or {},
                 params.get("ExpressionAttributeValues") or {})


def _projection(params: Mapping[str, Any], names: Names) -> list[Any] | None:
    text = params.get("ProjectionExpression")
    return parse_projection(text, names) if text is not None else None


def get_item(db: Database, params: Mapping[str, Any]) -> dict[str, Any]:
    table = db.table(params.get("TableName"))
    key_id = table.key_id(params.get("Key") or {})
    names = _names(params)
    paths = _projection(params, names)
    names.check_all_used()
    item = table.get(key_id)
    response = capacity(params, table.name,
                        _read_units(item_size(item), bool(params.get("ConsistentRead"))),
                        write=False)
    if item is not None:
        response["Item"] = project(item, paths)
    return response


def batch_get_item(db: Database, params: Mapping[str, Any]) -> dict[str, Any]:
    requests = params.get("RequestItems") or {}
    if sum(len(r.get("Keys") or []) for r in requests.values()) > 100:
        raise invalid("Too many items requested for the BatchGetItem call")
    responses: dict[str, list[dict[str, Any]]] = {}
    consumed: dict[str, float] = {}
    for name, request in requests.items():
        table = db.table(name)
        names = _names(request)
        paths = _projection(request, names)
        names.check_all_used()
        ids = [table.key_id(k) for k in request.get("Keys") or []]
        if len(set(ids)) != len(ids):
            raise invalid("Provided list of item keys contains duplicates")
        found = responses.setdefault(name, [])
        for key_id in ids:
            item = table.get(key_id)
            consumed[name] = consumed.get(name, 0.0) + _read_units(
                item_size(item), bool(request.get("ConsistentRead")))
            if item is not None:
                found.append(project(item, paths))
    response: dict[str, Any] = {"Responses": responses, "UnprocessedKeys": {}}
    if params.get("ReturnConsumedCapacity") in ("TOTAL", "INDEXES"):
        response["ConsumedCapacity"] = [
            {"TableName": t, "CapacityUnits": u, "ReadCapacityUnits": u}
            for t, u in consumed.items()]
    return response


def transact_get_items(db: Database, params: Mapping[str, Any]) -> dict[str, Any]:
    entries = params.get("TransactItems") or []
    if not entries or len(entries) > 100:
        raise invalid("Member must have length less than or equal to 100")
    responses: list[dict[str, Any]] = []
    for entry in entries:
        got = get_item(db, {**entry["Get"], "ConsistentRead": True})
        responses.append({"Item": got["Item"]} if "Item" in got else {})
    return {"Responses": responses}


# -- Query and Scan --------------------------------------------------------------------

def _index(table: Table, params: Mapping[str, Any]) -> Index | None:
    name = params.get("IndexName")
    if name is None:
        return None
    if name not in table.indexes:
        raise invalid(f"The table does not have the specified index: {name}")
    if params.get("ConsistentRead"):
        raise invalid("Consistent reads are not supported on global secondary indexes")
    return table.indexes[name]


def _key_condition(tree: tuple[Any, ...], hash_key: str, range_key: str | None,
                   ) -> tuple[dict[str, Any], tuple[Any, ...] | None]:
    """(the partition key's value, the sort-key condition) of a key condition."""
    parts = [tree[1], tree[2]] if tree[0] == "and" else [tree]
    hash_value: dict[str, Any] | None = None
    range_cond: tuple[Any, ...] | None = None
    for part in parts:
        path = (part[2] if part[0] == "cmp" else part[1] if part[0] == "between"
                else part[2][0] if part[0] == "fn" else None)
        if not path or path[0] != "path" or len(path[1]) != 1:
            raise invalid("Query key condition not supported")
        name = path[1][0]
        if name == hash_key and part[0] == "cmp" and part[1] == "=" \
                and part[3][0] == "value":
            hash_value = part[3][1]
        elif name == range_key and (part[0] == "between" or (
                part[0] == "cmp" and part[1] != "<>") or (
                part[0] == "fn" and part[1] == "begins_with")):
            range_cond = part
        else:
            raise invalid("Query key condition not supported")
    if hash_value is None:
        raise invalid(f"Query condition missed key schema element: {hash_key}")
    return hash_value, range_cond


def _order(table: Table, index: Index | None) -> list[str]:
    if index is None:
        return list(table.key_names)
    return [index.hash_key, *([index.range_key] if index.range_key else []),
            *table.key_names]


def _start_key(table: Table, index: Index | None, start: Mapping[str, Any] | None,
               ) -> tuple[Any, ...] | None:
    if start is None:
        return None
    names = _order(table, index)
    if set(start) != set(names):
        raise invalid("The provided starting key is invalid: The provided key element does "
                      "not match the schema")
    return tuple(sort_key(validate_value(start[n])) for n in names[1:] or names)


def _page(db: Database, params: Mapping[str, Any], table: Table,
          index: Index | None, source: Iterable[dict[str, Any]],
          names: Names, *, forward: bool = True) -> dict[str, Any]:
    """One page of a Query or Scan over ``source`` (already in reading order)."""
    filter_text = params.get("FilterExpression")
    filter_tree = (parse_condition(filter_text, names, "FilterExpression")
                   if filter_text is not None else None)
    paths = _projection(params, names)
    names.check_all_used()
    select = params.get("Select") or ("SPECIFIC_ATTRIBUTES" if paths else "ALL_ATTRIBUTES")
    if select == "COUNT" and paths:
        raise invalid("Cannot specify the AttributesToGet or ProjectionExpression when "
                      "choosing to get only the COUNT")
    limit = params.get("Limit")
    if limit is not None and int(limit) < 1:
        raise invalid("1 validation error detected: Value at 'limit' failed to satisfy "
                      "constraint: Member must have value greater than or equal to 1")
    order = _order(table, index)[1:] or _order(table, index)
    start = _start_key(table, index, params.get("ExclusiveStartKey"))
    items: list[dict[str, Any]] = []
    scanned = read = 0
    last: dict[str, Any] | None = None
    for item in source:
        if start is not None:
            position = tuple(sort_key(item[n]) for n in order)
            if (position <= start) if forward else (position >= start):
                continue
        view = table.index_view(index, item) if index is not None else item
        scanned += 1
        read += item_size(view)
        if matches(view, filter_tree):
            items.append(project(view, paths))
        if (limit is not None and scanned >= int(limit)) or read >= PAGE_BYTES:
            last = {n: view[n] for n in _order(table, index)}
            break
    consistent = bool(params.get("ConsistentRead"))
    response = capacity(params, table.name, _read_units(read, consistent), write=False)
    response.update({"Count": len(items), "ScannedCount": scanned})
    if select != "COUNT":
        response["Items"] = items
    if last is not None:
        response["LastEvaluatedKey"] = last
    del db
    return response


def query(db: Database, params: Mapping[str, Any]) -> dict[str, Any]:
    table = db.table(params.get("TableName"))
    index = _index(table, params)
    names = _names(params)
    text = params.get("KeyConditionExpression")
    if text is None:
        raise invalid("Either the KeyConditions or KeyConditionExpression parameter must be "
                      "specified in the request.")
    tree = parse_condition(text, names, "KeyConditionExpression")
    hash_key = index.hash_key if index else table.hash_key
    range_key = index.range_key if index else table.range_key
    hash_value, range_cond = _key_condition(tree, hash_key, range_key)
    if next(iter(hash_value)) != table.types[hash_key]:
        raise invalid("One or more parameter values were invalid: Condition parameter type "
                      "does not match schema type")
    source = [item for item in table.partition(index, hash_value)
              if matches(item, range_cond)]
    forward = params.get("ScanIndexForward", True) is not False
    if not forward:
        source.reverse()
    return _page(db, params, table, index, source, names, forward=forward)


def scan(db: Database, params: Mapping[str, Any]) -> dict[str, Any]:
    table = db.table(params.get("TableName"))
    index = _index(table, params)
    names = _names(params)
    source: Iterable[dict[str, Any]] = table.scan_order(index)
    total = params.get("TotalSegments")
    if total is not None:
        segment = int(params.get("Segment", 0))
        hash_key = index.hash_key if index else table.hash_key
        source = [item for item in source if int.from_bytes(hashlib.md5(
            repr(sort_key(item[hash_key])).encode()).digest()[:4], "big") % int(total)
            == segment]
    if params.get("ExclusiveStartKey") is not None:
        # A scan resumes after the start key in scan order, not in key order.
        source = list(source)
        names_order = _order(table, index)
        start = params["ExclusiveStartKey"]
        for i, item in enumerate(source):
            if all(n in item and item[n] == start.get(n) for n in names_order):
                source = source[i + 1:]
                break
        params = {k: v for k, v in params.items() if k != "ExclusiveStartKey"}
    return _page(db, params, table, index, source, names)


# -- PartiQL: the one statement shape the store sends ------------------------------------

_SELECT = re.compile(
    r'^\s*SELECT\s+(?P<projection>\*|"[^"]+"(?:\s*,\s*"[^"]+")*)\s+FROM\s+"(?P<table>[^"]+)"'
    r'(?:\."(?P<index>[^"]+)")?\s+WHERE\s+"(?P<key>[^"]+)"\s+IN\s*\[(?P<marks>[?,\s]+)\]'
    r'(?:\s+AND\s+(?:"(?P<attr>[^"]+)"\s*(?P<op><=|>=|<|>|=)\s*\?'
    r'|begins_with\(\s*"(?P<prefixed>[^"]+)"\s*,\s*\?\s*\)))?\s*$', re.IGNORECASE)


def execute_statement(db: Database, params: Mapping[str, Any]) -> dict[str, Any]:
    """``SELECT`` with ``IN`` on an index's partition key (``Tables.select_in``): a Query
    of each key, as DynamoDB answers it. Any other statement is refused the way
    DynamoDB refuses a statement it cannot run, so the store falls back to Queries."""
    statement = str(params.get("Statement") or "")
    match = _SELECT.match(statement)
    if match is None:
        raise invalid("Statement wasn't well formed, can't be processed: the in-memory "
                      "twin runs only the SELECT ... IN [...] statements the store sends, "
                      f"not {statement[:200]!r}")
    values = list(params.get("Parameters") or [])
    count = match.group("marks").count("?")
    if len(values) != count + (1 if match.group("attr") or match.group("prefixed") else 0):
        raise invalid("Number of parameters in request and statement don't match.")
    table = db.table(match.group("table"))
    index = table.indexes.get(match.group("index") or "")
    if match.group("index") and index is None:
        raise invalid(f"The table does not have the specified index: {match.group('index')}")
    key = match.group("key")
    if key != (index.hash_key if index else table.hash_key):
        raise DynamoError("ValidationException", "Statement wasn't well formed: "
                          "IN is only supported on the partition key here")
    extra: tuple[Any, ...] | None = None
    if match.group("attr"):
        extra = ("cmp", match.group("op"), ("path", (match.group("attr"),)),
                 ("value", validate_value(values[-1])))
    elif match.group("prefixed"):
        extra = ("fn", "begins_with", [("path", (match.group("prefixed"),)),
                                       ("value", validate_value(values[-1]))])
    limit = int(params.get("Limit") or 0) or None
    items: list[dict[str, Any]] = []
    more = False
    read = 0
    for value in values[:count]:
        for item in table.partition(index, validate_value(value)):
            view = table.index_view(index, item) if index else item
            if not matches(view, extra):
                continue
            if limit is not None and len(items) >= limit:
                more = True
                break
            read += item_size(view)
            items.append(view)
        if more:
            break
    projection = match.group("projection")
    if projection != "*":
        wanted: list[tuple[str | int, ...]] = [(p.strip().strip('"'),)
                                               for p in projection.split(",")]
        items = [project(item, wanted) for item in items]
    response = capacity(params, table.name, _read_units(read, False), write=False)
    response["Items"] = items
    if more:
        response["NextToken"] = f"memory-{len(items)}"
    return response


READS = {"GetItem": get_item, "BatchGetItem": batch_get_item,
         "TransactGetItems": transact_get_items, "Query": query, "Scan": scan,
         "ExecuteStatement": execute_statement}
