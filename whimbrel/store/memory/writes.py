"""The twin's writes: PutItem, UpdateItem, DeleteItem, BatchWriteItem and
TransactWriteItems, with their conditions, return values and consumed capacity."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from whimbrel.store.memory.evaluate import apply_update, matches
from whimbrel.store.memory.parse import Names, parse_condition, parse_update
from whimbrel.store.memory.tables import Database, KeyId, Table, capacity
from whimbrel.store.memory.values import (
    MAX_ITEM_BYTES,
    DynamoError,
    copy_value,
    invalid,
    item_size,
    same,
    validate_item,
)

__all__ = ["WRITES"]


def _units(size: int, per: int) -> float:
    return float(max(1, math.ceil(size / per)))


def write_units(table: Table, old: Mapping[str, Any] | None,
                new: Mapping[str, Any] | None) -> tuple[float, dict[str, float]]:
    """Write units for replacing ``old`` by ``new``: the larger image per KB, and each
    index entry written or removed (an index key that changed costs a delete and a put)."""
    units = _units(max(item_size(old), item_size(new)), 1024)
    indexes: dict[str, float] = {}
    for index in table.indexes.values():
        was = old is not None and table.in_index(index, old)
        now = new is not None and table.in_index(index, new)
        cost = 0.0
        for image, present in ((old, was), (new, now)):
            if present and image is not None:
                cost += _units(item_size(table.index_view(index, image)) + 100, 1024)
        if was and now and old is not None and new is not None and all(
                same(old[k], new[k]) for k in (index.hash_key, index.range_key) if k):
            cost = _units(max(item_size(table.index_view(index, old)),
                              item_size(table.index_view(index, new))) + 100, 1024)
        if cost:
            indexes[index.name] = cost
    return units, indexes


def _names(params: Mapping[str, Any]) -> Names:
    return Names(params.get("ExpressionAttributeNames") or {},
                 params.get("ExpressionAttributeValues") or {})


def _condition(params: Mapping[str, Any], names: Names) -> tuple[Any, ...] | None:
    text = params.get("ConditionExpression")
    return parse_condition(text, names) if text is not None else None


def _current(params: Mapping[str, Any], table: Table, key_id: KeyId, names: Names,
             cond: tuple[Any, ...] | None) -> dict[str, Any] | None:
    """The item under ``key_id`` once every name and value was used and the condition
    holds on it; else the lost condition, with the item when asked for (ALL_OLD)."""
    names.check_all_used()
    old = table.get(key_id)
    if not matches(old, cond):
        raise _lost(params, old)
    return old


def _lost(params: Mapping[str, Any], old: Mapping[str, Any] | None) -> DynamoError:
    item = (copy_value(dict(old)) if old is not None
            and params.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" else None)
    return DynamoError("ConditionalCheckFailedException", "The conditional request failed",
                       item=item)


def _return_values(params: Mapping[str, Any], allowed: tuple[str, ...]) -> str:
    value = str(params.get("ReturnValues") or "NONE")
    if value not in allowed:
        raise invalid(f"ReturnValues can only be {' or '.join(allowed)}")
    return value


class Prepared:
    """One write checked and computed, not yet applied (transactions check all first)."""

    def __init__(self, table: Table, key_id: KeyId, old: dict[str, Any] | None,
                 new: dict[str, Any] | None, touched: tuple[str, ...] = ()) -> None:
        self.table, self.key_id, self.old, self.new, self.touched = (
            table, key_id, old, new, touched)


def prepare_put(db: Database, params: Mapping[str, Any]) -> Prepared:
    table = db.table(params.get("TableName"))
    item = validate_item(params.get("Item") or {})
    key_id = table.item_key_id(item)
    names = _names(params)
    old = _current(params, table, key_id, names, _condition(params, names))
    return Prepared(table, key_id, old, item)


def prepare_update(db: Database, params: Mapping[str, Any]) -> Prepared:
    table = db.table(params.get("TableName"))
    key = params.get("Key") or {}
    key_id = table.key_id(key)
    names = _names(params)
    text = params.get("UpdateExpression")
    update = parse_update(text, names) if text is not None else None
    cond = _condition(params, names)
    if update is not None:
        for path in update.paths():
            if path[0] in table.key_names:
                raise invalid("One or more parameter values were invalid: Cannot update "
                              f"attribute {path[0]}. This attribute is part of the key")
    old = _current(params, table, key_id, names, cond)
    base = old if old is not None else {n: copy_value(key[n]) for n in table.key_names}
    new = apply_update(base, update) if update is not None else copy_value(base)
    if item_size(new) > MAX_ITEM_BYTES:
        raise invalid("Item size to update has exceeded the maximum allowed size")
    table.item_key_id(new)  # index key types
    touched = tuple(dict.fromkeys(str(p[0]) for p in update.paths())) if update else ()
    return Prepared(table, key_id, old, new, touched)


def prepare_delete(db: Database, params: Mapping[str, Any]) -> Prepared:
    table = db.table(params.get("TableName"))
    key_id = table.key_id(params.get("Key") or {})
    names = _names(params)
    old = _current(params, table, key_id, names, _condition(params, names))
    return Prepared(table, key_id, old, None)


def prepare_check(db: Database, params: Mapping[str, Any]) -> Prepared:
    table = db.table(params.get("TableName"))
    key_id = table.key_id(params.get("Key") or {})
    names = _names(params)
    if params.get("ConditionExpression") is None:
        raise invalid("The ConditionExpression parameter is required for ConditionCheck")
    old = _current(params, table, key_id, names, _condition(params, names))
    return Prepared(table, key_id, old, old)


def _apply(db: Database, op: Prepared, params: Mapping[str, Any], *,
           factor: float = 1.0) -> dict[str, Any]:
    units, indexes = write_units(op.table, op.old, op.new)
    op.table.write(op.key_id, op.new, db.clock())
    return capacity(params, op.table.name, units * factor,
                    {k: v * factor for k, v in indexes.items()}, write=True)


def put_item(db: Database, params: Mapping[str, Any]) -> dict[str, Any]:
    returns = _return_values(params, ("NONE", "ALL_OLD"))
    op = prepare_put(db, params)
    response = _apply(db, op, params)
    if returns == "ALL_OLD" and op.old is not None:
        response["Attributes"] = copy_value(op.old)
    return response


def delete_item(db: Database, params: Mapping[str, Any]) -> dict[str, Any]:
    returns = _return_values(params, ("NONE", "ALL_OLD"))
    op = prepare_delete(db, params)
    response = _apply(db, op, params)
    if returns == "ALL_OLD" and op.old is not None:
        response["Attributes"] = copy_value(op.old)
    return response


def update_item(db: Database, params: Mapping[str, Any]) -> dict[str, Any]:
    returns = _return_values(params, ("NONE", "ALL_OLD", "UPDATED_OLD", "ALL_NEW",
                                      "UPDATED_NEW"))
    op = prepare_update(db, params)
    response = _apply(db, op, params)
    image = op.old if returns in ("ALL_OLD", "UPDATED_OLD") else op.new
    if returns != "NONE" and image is not None:
        if returns.startswith("UPDATED_"):
            image = {n: image[n] for n in op.touched if n in image}
        if image:
            response["Attributes"] = copy_value(image)
    return response


def batch_write_item(db: Database, params: Mapping[str, Any]) -> dict[str, Any]:
    requests = params.get("RequestItems") or {}
    total = sum(len(v) for v in requests.values())
    if not total or total > 25:
        raise invalid("Too many items requested for the BatchWriteItem call" if total else
                      "1 validation error detected: Value at 'requestItems' failed to "
                      "satisfy constraint: Map value must satisfy constraint: [Member must "
                      "have length less than or equal to 25, Member must have length greater "
                      "than or equal to 1]")
    planned: list[Prepared] = []
    for name, entries in requests.items():
        seen: set[KeyId] = set()
        for entry in entries:
            if "PutRequest" in entry:
                sub = {"TableName": name, "Item": entry["PutRequest"].get("Item")}
                op = prepare_put(db, sub)
            elif "DeleteRequest" in entry:
                op = prepare_delete(db, {"TableName": name,
                                         "Key": entry["DeleteRequest"].get("Key")})
            else:
                raise invalid("Supplied AttributeValue has neither PutRequest nor "
                              "DeleteRequest")
            if op.key_id in seen:
                raise invalid("Provided list of item keys contains duplicates")
            seen.add(op.key_id)
            planned.append(op)
    consumed: dict[str, float] = {}
    for op in planned:
        units, indexes = write_units(op.table, op.table.get(op.key_id), op.new)
        op.table.write(op.key_id, op.new, db.clock())
        consumed[op.table.name] = consumed.get(op.table.name, 0.0) + units + sum(
            indexes.values())
    response: dict[str, Any] = {"UnprocessedItems": {}}
    if params.get("ReturnConsumedCapacity") in ("TOTAL", "INDEXES"):
        response["ConsumedCapacity"] = [
            {"TableName": t, "CapacityUnits": u, "WriteCapacityUnits": u}
            for t, u in consumed.items()]
    return response


_TRANSACT = {"Put": prepare_put, "Update": prepare_update, "Delete": prepare_delete,
             "ConditionCheck": prepare_check}


def transact_write_items(db: Database, params: Mapping[str, Any]) -> dict[str, Any]:
    """All or nothing: every condition is checked before anything is written; a lost
    one cancels the transaction with a reason per item, as DynamoDB reports them."""
    entries = params.get("TransactItems") or []
    if not entries or len(entries) > 100:
        raise invalid("1 validation error detected: Value at 'transactItems' failed to "
                      "satisfy constraint: Member must have length less than or equal to 100")
    planned: list[Prepared | None] = []
    reasons: list[dict[str, Any]] = []
    seen: set[tuple[str, KeyId]] = set()
    for entry in entries:
        (kind, sub), = entry.items()
        op: Prepared | None
        try:
            op = _TRANSACT[kind](db, sub)
        except DynamoError as exc:
            if exc.code != "ConditionalCheckFailedException":
                raise
            reason: dict[str, Any] = {"Code": "ConditionalCheckFailed",
                                      "Message": exc.message}
            if exc.item is not None:
                reason["Item"] = exc.item
            reasons.append(reason)
            planned.append(None)
            table = db.table(sub.get("TableName"))
            ident = (table.name, table.key_id(sub["Key"]) if "Key" in sub
                     else table.item_key_id(sub.get("Item") or {}))
        else:
            reasons.append({"Code": "None"})
            planned.append(op)
            ident = (op.table.name, op.key_id)
        if ident in seen:
            raise invalid("Transaction request cannot include multiple operations on one "
                          "item")
        seen.add(ident)
    if any(op is None for op in planned):
        codes = ", ".join(r["Code"] for r in reasons)
        error = DynamoError("TransactionCanceledException", "Transaction cancelled, please "
                            f"refer cancellation reasons for specific reasons [{codes}]")
        error.reasons = reasons  # type: ignore[attr-defined]
        raise error
    consumed: dict[str, float] = {}
    for done in planned:
        assert done is not None
        op = done
        units, indexes = write_units(op.table, op.old, op.new)
        if op.new is not op.old:  # a ConditionCheck writes nothing
            op.table.write(op.key_id, op.new, db.clock())
        consumed[op.table.name] = consumed.get(op.table.name, 0.0) + 2 * (
            units + sum(indexes.values()))
    response: dict[str, Any] = {}
    if params.get("ReturnConsumedCapacity") in ("TOTAL", "INDEXES"):
        response["ConsumedCapacity"] = [
            {"TableName": t, "CapacityUnits": u, "WriteCapacityUnits": u}
            for t, u in consumed.items()]
    return response


WRITES = {"PutItem": put_item, "UpdateItem": update_item, "DeleteItem": delete_item,
          "BatchWriteItem": batch_write_item, "TransactWriteItems": transact_write_items}
