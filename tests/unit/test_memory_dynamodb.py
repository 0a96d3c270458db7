"""The in-memory twin of DynamoDB on its own: the expression evaluator, conditional
writes, indexes and paging, validation errors, capacity and streams. (That it agrees with
DynamoDB Local is checked by tests/integration/test_store_contract.py and
tests/integration/test_memory_vs_local.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from whimbrel.contract.errors import StoreError
from whimbrel.store.errors import ConditionLost
from whimbrel.store.memory import MemoryDynamoDB
from whimbrel.testing import StepClock

pytestmark = pytest.mark.twin

T = "t_items"


def S(v: str) -> dict[str, Any]:
    return {"S": v}


def N(v: float | int | str) -> dict[str, Any]:
    return {"N": str(v)}


@pytest.fixture
def db() -> MemoryDynamoDB:
    twin = MemoryDynamoDB(clock=StepClock(1_000.0))
    twin.call("CreateTable", {
        "TableName": T, "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                      {"AttributeName": "sk", "KeyType": "RANGE"}],
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                 {"AttributeName": "sk", "AttributeType": "N"},
                                 {"AttributeName": "g", "AttributeType": "S"},
                                 {"AttributeName": "gs", "AttributeType": "N"}],
        "GlobalSecondaryIndexes": [{
            "IndexName": "by_g",
            "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"},
                          {"AttributeName": "gs", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "KEYS_ONLY"}}],
        "StreamSpecification": {"StreamEnabled": True,
                                "StreamViewType": "NEW_AND_OLD_IMAGES"}})
    return twin


def put(db: MemoryDynamoDB, item: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return db.call("PutItem", {"TableName": T, "Item": item, **extra})


def get(db: MemoryDynamoDB, pk: str = "a", sk: int = 1) -> dict[str, Any] | None:
    item: dict[str, Any] | None = db.call(
        "GetItem", {"TableName": T, "Key": {"pk": S(pk), "sk": N(sk)}}).get("Item")
    return item


def update(db: MemoryDynamoDB, expression: str, values: dict[str, Any] | None = None,
           names: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"TableName": T, "Key": {"pk": S("a"), "sk": N(1)},
                              "UpdateExpression": expression, "ReturnValues": "ALL_NEW",
                              **extra}
    if values:
        params["ExpressionAttributeValues"] = values
    if names:
        params["ExpressionAttributeNames"] = names
    attributes: dict[str, Any] = db.call("UpdateItem", params)["Attributes"]
    return attributes


def holds(db: MemoryDynamoDB, condition: str, values: dict[str, Any] | None = None,
          names: dict[str, str] | None = None) -> bool:
    """Whether ``condition`` holds on item (a, 1), asked as a ConditionCheck would."""
    params: dict[str, Any] = {"TableName": T, "Key": {"pk": S("a"), "sk": N(1)},
                              "ConditionExpression": condition}
    if values:
        params["ExpressionAttributeValues"] = values
    if names:
        params["ExpressionAttributeNames"] = names
    try:
        db.call("DeleteItem", {**params, "ReturnValues": "ALL_OLD"})
    except ConditionLost:
        return False
    put(db, db.last_deleted)  # type: ignore[attr-defined]
    return True


@pytest.fixture
def item(db: MemoryDynamoDB) -> dict[str, Any]:
    doc = {"pk": S("a"), "sk": N(1), "n": N(5), "s": S("hello"), "b": {"BOOL": True},
           "ss": {"SS": ["x", "y"]}, "l": {"L": [N(1), S("two"), {"M": {"k": S("v")}}]},
           "m": {"M": {"nest": {"M": {"deep": N(7)}}, "tag": S("t")}}, "nul": {"NULL": True}}
    put(db, doc)
    original = db.call

    def call(operation: str, params: dict[str, Any]) -> dict[str, Any]:
        response = original(operation, params)
        if operation == "DeleteItem" and "Attributes" in response:
            db.last_deleted = response["Attributes"]  # type: ignore[attr-defined]
        return response

    db.call = call  # type: ignore[method-assign]
    return doc


@pytest.mark.parametrize(("condition", "expected"), [
    ("attribute_exists(n)", True), ("attribute_not_exists(n)", False),
    ("attribute_not_exists(absent)", True), ("n = :five", True), ("n <> :five", False),
    ("absent <> :five", True), ("absent = :five", False), ("n < :six", True),
    ("n BETWEEN :one AND :five", True), ("n IN (:one, :six)", False),
    ("n IN (:one, :five)", True), ("s = :five", False), ("s > :five", False),
    ("begins_with(s, :he)", True), ("contains(s, :ell)", True), ("contains(ss, :x)", True),
    ("contains(l, :two)", True), ("size(s) = :five", True), ("size(l) = :three", True),
    ("size(ss) < :three", True), ("size(n) = :one", False),
    ("attribute_type(n, :type_n)", True), ("attribute_type(s, :type_n)", False),
    ("m.nest.deep = :seven", True), ("l[2].k = :v", True), ("l[9] = :v", False),
    ("NOT (n = :five) OR s = :he", False), ("n = :five AND (s = :he OR b = :true)", True),
    ("NOT attribute_exists(absent) AND NOT n > :six", True),
    ("nul = :null", True),
])
def test_condition_expressions(db: MemoryDynamoDB, item: dict[str, Any], condition: str,
                               expected: bool) -> None:
    values = {":one": N(1), ":three": N(3), ":five": N(5), ":six": N(6), ":seven": N(7),
              ":he": S("he"), ":ell": S("ell"), ":x": S("x"), ":two": S("two"),
              ":type_n": S("N"), ":v": S("v"), ":true": {"BOOL": True},
              ":null": {"NULL": True}}
    used = {k: v for k, v in values.items() if k in condition}
    assert holds(db, condition, used) is expected


def test_a_lost_condition_returns_the_item_as_it_is_now(db: MemoryDynamoDB,
                                                        item: dict[str, Any]) -> None:
    with pytest.raises(ConditionLost) as lost:
        update(db, "SET n = :v", {":v": N(1), ":old": N(4)}, ConditionExpression="n = :old",
               ReturnValuesOnConditionCheckFailure="ALL_OLD")
    assert lost.value.item == item
    with pytest.raises(ConditionLost) as bare:
        update(db, "SET n = :v", {":v": N(1), ":old": N(4)}, ConditionExpression="n = :old")
    assert bare.value.item is None
    assert get(db) == item  # nothing changed


def test_update_actions(db: MemoryDynamoDB, item: dict[str, Any]) -> None:
    got = update(db, "SET n = n + :one, c = if_not_exists(c, :zero) - :one, "
                     "l2 = list_append(:more, l), m.nest.deep = :v, #s = :v "
                     "REMOVE nul, l[0] ADD ss2 :z, cnt :one DELETE ss :x",
                 {":one": N(1), ":zero": N(0), ":more": {"L": [N(4)]}, ":v": S("v"),
                  ":z": {"SS": ["z"]}, ":x": {"SS": ["x"]}}, {"#s": "s"})
    assert got["n"] == N(6) and got["c"] == N(-1) and got["cnt"] == N(1)
    assert got["l"] == {"L": [S("two"), {"M": {"k": S("v")}}]}  # operands: the old item
    assert got["l2"] == {"L": [N(4), N(1), S("two"), {"M": {"k": S("v")}}]}
    assert got["m"]["M"]["nest"] == {"M": {"deep": S("v")}} and got["s"] == S("v")
    assert "nul" not in got and got["ss"] == {"SS": ["y"]} and got["ss2"] == {"SS": ["z"]}


def test_numbers_are_stored_as_dynamodb_returns_them(db: MemoryDynamoDB,
                                                     item: dict[str, Any]) -> None:
    assert update(db, "SET f = :f, g2 = :g", {":f": N("1.50"), ":g": N("100")})["f"] == N(1.5)
    assert get(db)["g2"] == N(100)  # type: ignore[index]
    assert update(db, "SET f = f - :f", {":f": N("0.5")})["f"] == N(1)


@pytest.mark.parametrize(("expression", "values", "names", "message"), [
    ("SET n = :v", {":v": N(1), ":unused": N(2)}, None,
     "Value provided in ExpressionAttributeValues unused in expressions: keys: {:unused}"),
    ("SET #a = :v", {":v": N(1)}, {"#a": "a", "#b": "b"},
     "Value provided in ExpressionAttributeNames unused in expressions: keys: {#b}"),
    ("SET n = :nope", None, None, "attribute value: :nope"),
    ("SET #nope = :v", {":v": N(1)}, None, "attribute name: #nope"),
    ("SET status = :v", {":v": N(1)}, None,
     "Attribute name is a reserved keyword; reserved keyword: status"),
    ("SET n = :v, n = :v", {":v": N(1)}, None, "Two document paths overlap"),
    ("SET pk = :v", {":v": S("b")}, None, "Cannot update attribute pk"),
    ("SET s = s + :v", {":v": N(1)}, None, "incorrect data type"),
    ("SET n = :v SET s = :v", {":v": N(1)}, None, "can only be used once"),
    ("SET absent.x = :v", {":v": N(1)}, None, "document path provided in the update"),
    ("SET n = = :v", {":v": N(1)}, None, "Syntax error"),
])
def test_bad_expressions_are_refused_as_dynamodb_refuses_them(
        db: MemoryDynamoDB, item: dict[str, Any], expression: str,
        values: dict[str, Any] | None, names: dict[str, str] | None, message: str) -> None:
    with pytest.raises(StoreError) as refused:
        update(db, expression, values, names)
    assert refused.value.aws_code == "ValidationException"
    assert message in str(refused.value)
    assert get(db) == item  # a refused request changes nothing


@pytest.mark.parametrize(("item", "message"), [
    ({"pk": S("a")}, "Missing the key sk in the item"),
    ({"pk": N(1), "sk": N(1)}, "Type mismatch for key pk expected: S actual: N"),
    ({"pk": S(""), "sk": N(1)}, "cannot contain an empty string value"),
    ({"pk": S("a"), "sk": N(1), "g": N(3)}, "Type mismatch for Index Key g"),
    ({"pk": S("a"), "sk": N(1), "ss": {"SS": []}}, "may not be empty"),
    ({"pk": S("a"), "sk": N(1), "big": S("x" * 410_000)}, "Item size has exceeded"),
    ({"pk": S("a"), "sk": N("1e200")}, "Number overflow"),
])
def test_bad_items_are_refused(db: MemoryDynamoDB, item: dict[str, Any], message: str) -> None:
    with pytest.raises(StoreError) as refused:
        put(db, item)
    assert refused.value.aws_code == "ValidationException" and not refused.value.retryable
    assert message in str(refused.value)


def test_a_absent_table_is_resource_not_found(db: MemoryDynamoDB) -> None:
    with pytest.raises(StoreError) as absent:
        db.call("GetItem", {"TableName": "nope", "Key": {"pk": S("a")}})
    assert absent.value.aws_code == "ResourceNotFoundException"


def _fill(db: MemoryDynamoDB) -> None:
    for sk in range(1, 8):
        item = {"pk": S("p"), "sk": N(sk), "v": N(sk % 3)}
        if sk % 2:
            item.update(g=S("odd"), gs=N(10 - sk))  # in the sparse index
        put(db, item)


def test_query_order_paging_filters_and_count(db: MemoryDynamoDB) -> None:
    _fill(db)
    base = {"TableName": T, "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
            "ExpressionAttributeValues": {":p": S("p"), ":a": N(2), ":b": N(6)}}
    pages: list[list[str]] = []
    params: dict[str, Any] = {**base, "Limit": 2, "ScanIndexForward": False}
    while True:
        page = db.call("Query", params)
        pages.append([i["sk"]["N"] for i in page["Items"]])
        if "LastEvaluatedKey" not in page:
            break
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    assert pages == [["6", "5"], ["4", "3"], ["2"]]
    filtered = db.call("Query", {**base, "FilterExpression": "v = :z",
                                 "ExpressionAttributeValues": {
                                     **base["ExpressionAttributeValues"], ":z": N(0)}})
    assert [i["sk"]["N"] for i in filtered["Items"]] == ["3", "6"]
    assert filtered["ScannedCount"] == 5 and filtered["Count"] == 2
    counted = db.call("Query", {**base, "Select": "COUNT"})
    assert counted["Count"] == 5 and "Items" not in counted


def test_a_sparse_index_holds_only_items_with_its_keys_and_its_projection(
        db: MemoryDynamoDB) -> None:
    _fill(db)
    got = db.call("Query", {"TableName": T, "IndexName": "by_g",
                            "KeyConditionExpression": "g = :g AND gs <= :top",
                            "ExpressionAttributeValues": {":g": S("odd"), ":top": N(7)}})
    assert [i["gs"]["N"] for i in got["Items"]] == ["3", "5", "7"]
    assert set(got["Items"][0]) == {"pk", "sk", "g", "gs"}  # KEYS_ONLY: no "v"
    update(db, "REMOVE g", None, None)  # item (a,1) never was in it; (p,1) is
    db.call("UpdateItem", {"TableName": T, "Key": {"pk": S("p"), "sk": N(1)},
                           "UpdateExpression": "REMOVE g"})
    again = db.call("Query", {"TableName": T, "IndexName": "by_g",
                              "KeyConditionExpression": "g = :g",
                              "ExpressionAttributeValues": {":g": S("odd")}})
    assert [i["sk"]["N"] for i in again["Items"]] == ["7", "5", "3"]
    with pytest.raises(StoreError, match="Consistent reads are not supported"):
        db.call("Query", {"TableName": T, "IndexName": "by_g", "ConsistentRead": True,
                          "KeyConditionExpression": "g = :g",
                          "ExpressionAttributeValues": {":g": S("odd")}})


def test_the_select_in_statement_the_store_sends(db: MemoryDynamoDB) -> None:
    _fill(db)
    got = db.call("ExecuteStatement", {
        "Statement": f'SELECT "gs" FROM "{T}"."by_g" WHERE "g" IN [?, ?] AND "gs" <= ?',
        "Parameters": [S("odd"), S("even"), N(5)], "Limit": 100})
    assert sorted(i["gs"]["N"] for i in got["Items"]) == ["3", "5"]
    assert "NextToken" not in got
    with pytest.raises(StoreError) as refused:
        db.call("ExecuteStatement", {"Statement": f'DELETE FROM "{T}"'})
    assert not refused.value.retryable  # the store then reads key by key


def test_capacity_by_dynamodb_rules(db: MemoryDynamoDB) -> None:
    small = put(db, {"pk": S("a"), "sk": N(1)}, ReturnConsumedCapacity="INDEXES")
    assert small["ConsumedCapacity"]["CapacityUnits"] == 1.0
    big = put(db, {"pk": S("a"), "sk": N(2), "x": S("x" * 3000), "g": S("g"), "gs": N(1)},
              ReturnConsumedCapacity="INDEXES")
    assert big["ConsumedCapacity"]["Table"]["CapacityUnits"] == 3.0
    assert big["ConsumedCapacity"]["GlobalSecondaryIndexes"] == {
        "by_g": {"CapacityUnits": 1.0, "WriteCapacityUnits": 1.0}}
    read = db.call("GetItem", {"TableName": T, "Key": {"pk": S("a"), "sk": N(2)},
                               "ReturnConsumedCapacity": "TOTAL"})
    assert read["ConsumedCapacity"]["CapacityUnits"] == 0.5  # eventually consistent
    tx = db.call("TransactWriteItems", {"ReturnConsumedCapacity": "TOTAL", "TransactItems": [
        {"Put": {"TableName": T, "Item": {"pk": S("t"), "sk": N(1)}}}]})
    assert tx["ConsumedCapacity"][0]["CapacityUnits"] == 2.0


def test_a_transaction_is_all_or_nothing(db: MemoryDynamoDB) -> None:
    put(db, {"pk": S("a"), "sk": N(1), "n": N(1)})
    with pytest.raises(StoreError) as cancelled:
        db.call("TransactWriteItems", {"TransactItems": [
            {"Put": {"TableName": T, "Item": {"pk": S("b"), "sk": N(1)}}},
            {"ConditionCheck": {"TableName": T, "Key": {"pk": S("a"), "sk": N(1)},
                                "ConditionExpression": "n = :two",
                                "ExpressionAttributeValues": {":two": N(2)}}}]})
    assert cancelled.value.aws_code == "TransactionCanceledException"
    assert "[None, ConditionalCheckFailed]" in str(cancelled.value)
    assert get(db, "b") is None


def test_streams_record_changes_with_the_clock_and_skip_no_ops(db: MemoryDynamoDB) -> None:
    put(db, {"pk": S("a"), "sk": N(1), "n": N(1)})
    put(db, {"pk": S("a"), "sk": N(1), "n": N(1)})  # no change: no record
    db.clock.advance(5)  # type: ignore[attr-defined]
    update(db, "SET n = :two", {":two": N(2)})
    db.call("DeleteItem", {"TableName": T, "Key": {"pk": S("a"), "sk": N(1)}})
    streams = db.streams
    arn = streams.list_streams(TableName=T)["Streams"][0]["StreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
    it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    page = streams.get_records(ShardIterator=it, Limit=2)
    more = streams.get_records(ShardIterator=page["NextShardIterator"])
    records = page["Records"] + more["Records"]
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "REMOVE"]
    assert records[1]["dynamodb"]["OldImage"]["n"] == N(1)
    assert records[1]["dynamodb"]["NewImage"]["n"] == N(2)
    assert records[1]["dynamodb"]["ApproximateCreationDateTime"].timestamp() == 1005
    seqs = [r["dynamodb"]["SequenceNumber"] for r in records]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    after = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                       ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                                       SequenceNumber=seqs[0])["ShardIterator"]
    assert len(streams.get_records(ShardIterator=after)["Records"]) == 2


def test_ttl_expiry_removes_items_as_the_service(db: MemoryDynamoDB) -> None:
    db.call("UpdateTimeToLive", {"TableName": T, "TimeToLiveSpecification": {
        "Enabled": True, "AttributeName": "expires"}})
    put(db, {"pk": S("a"), "sk": N(1), "expires": N(1_010)})
    put(db, {"pk": S("a"), "sk": N(2), "expires": N(2_000)})
    assert db.expire() == 0
    db.clock.advance(20)  # type: ignore[attr-defined]
    assert db.expire() == 1 and get(db) is None and get(db, "a", 2) is not None
    last = db.tables[T].stream[-1]
    assert last["eventName"] == "REMOVE" and last["userIdentity"]["type"] == "Service"
