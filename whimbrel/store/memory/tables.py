"""One in-memory table: items by primary key, its global secondary indexes (sparse, as
DynamoDB's are: an item is in an index only when it holds the index's key attributes
with the declared types), and its stream of changes."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from whimbrel.store.memory.values import (
    attr_size,
    copy_value,
    invalid,
    item_size,
    items_equal,
    key_bytes,
    sort_key,
)

__all__ = ["Database", "Index", "Table", "capacity"]

#: The largest partition key and sort key value DynamoDB accepts (bytes).
MAX_HASH_KEY_BYTES = 2048
MAX_RANGE_KEY_BYTES = 1024


def _key_size(av: Mapping[str, Any], *, hash_key: bool) -> None:
    size = attr_size(av)
    if hash_key and size > MAX_HASH_KEY_BYTES:
        raise invalid("One or more parameter values were invalid: Size of hashkey has exceeded "
                      f"the maximum size limit of {MAX_HASH_KEY_BYTES} bytes")
    if not hash_key and size > MAX_RANGE_KEY_BYTES:
        raise invalid("One or more parameter values were invalid: Aggregated size of all range "
                      f"keys has exceeded the size limit of {MAX_RANGE_KEY_BYTES} bytes")

KeyId = tuple[Any, Any]


@dataclass(frozen=True)
class Index:
    name: str
    hash_key: str
    range_key: str | None
    projection: str = "ALL"
    non_key: tuple[str, ...] = ()


@dataclass
class Table:
    """A table's schema, items, indexes and stream."""

    name: str
    hash_key: str
    range_key: str | None
    types: dict[str, str]
    indexes: dict[str, Index]
    stream_view: str | None
    region: str
    created: float
    ttl_attribute: str | None = None
    items: dict[Any, dict[Any, dict[str, Any]]] = field(default_factory=dict)
    index_items: dict[str, dict[Any, dict[KeyId, dict[str, Any]]]] = field(default_factory=dict)
    stream: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in self.indexes:
            self.index_items[name] = {}

    @property
    def stream_arn(self) -> str | None:
        if self.stream_view is None:
            return None
        label = datetime.fromtimestamp(self.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        return (f"arn:aws:dynamodb:{self.region}:000000000000:table/{self.name}/stream/"
                f"{label}")

    @property
    def key_names(self) -> tuple[str, ...]:
        return (self.hash_key,) + ((self.range_key,) if self.range_key else ())

    # -- keys ---------------------------------------------------------------------------

    def _key_value(self, name: str, av: Any, *, where: str) -> Any:
        if av is None:
            raise invalid(where)
        kind = next(iter(av)) if isinstance(av, Mapping) and av else None
        if kind != self.types[name]:
            raise invalid(f"One or more parameter values were invalid: Type mismatch for key "
                          f"{name} expected: {self.types[name]} actual: {kind}")
        if kind in ("S", "B") and av[kind] == "":
            raise invalid("One or more parameter values are not valid. The AttributeValue for "
                          f"a key attribute cannot contain an empty string value. Key: {name}")
        _key_size(av, hash_key=name == self.hash_key)
        return key_bytes(av)

    def key_id(self, key: Mapping[str, Any]) -> KeyId:
        """The identity of a ``Key`` parameter (ValidationException: not this schema)."""
        if set(key) != set(self.key_names):
            raise invalid("The provided key element does not match the schema")
        mismatch = "The provided key element does not match the schema"
        first = self._key_value(self.hash_key, key.get(self.hash_key), where=mismatch)
        second = (self._key_value(self.range_key, key.get(self.range_key), where=mismatch)
                  if self.range_key else None)
        return first, second

    def item_key_id(self, item: Mapping[str, Any]) -> KeyId:
        """The identity of a whole item (ValidationException: a key attribute is missing
        or has the wrong type, or an index key has the wrong type)."""
        ids = []
        for name in self.key_names:
            ids.append(self._key_value(
                name, item.get(name), where="One or more parameter values were invalid: "
                f"Missing the key {name} in the item"))
        for index in self.indexes.values():
            for index_key in (index.hash_key, index.range_key):
                if index_key is None or index_key not in item:
                    continue
                name = index_key
                kind = next(iter(item[name]))
                if kind != self.types[name]:
                    raise invalid(f"One or more parameter values were invalid: Type mismatch "
                                  f"for Index Key {name} Expected: {self.types[name]} Actual: "
                                  f"{kind} IndexName: {index.name}")
                _key_size(item[name], hash_key=name == index.hash_key)
                if kind in ("S", "B") and item[name][kind] == "":
                    raise invalid("One or more parameter values are not valid. A value "
                                  "specified for a secondary index key is not supported. The "
                                  "AttributeValue for a key attribute cannot contain an empty "
                                  f"string value. IndexName: {index.name}, IndexKey: {name}")
        return ids[0], ids[1] if len(ids) > 1 else None

    def key_of(self, item: Mapping[str, Any]) -> dict[str, Any]:
        return {name: copy_value(item[name]) for name in self.key_names}

    # -- items --------------------------------------------------------------------------

    def get(self, key_id: KeyId) -> dict[str, Any] | None:
        return self.items.get(key_id[0], {}).get(key_id[1])

    def write(self, key_id: KeyId, new: dict[str, Any] | None, now: float, *,
              by_ttl: bool = False) -> dict[str, Any] | None:
        """Replace the item at ``key_id`` with ``new`` (None: delete it); keeps the
        indexes and the stream. Returns the old item."""
        partition = self.items.setdefault(key_id[0], {})
        old = partition.get(key_id[1])
        if new is None:
            partition.pop(key_id[1], None)
            if not partition:
                del self.items[key_id[0]]
        else:
            partition[key_id[1]] = new
        for index in self.indexes.values():
            entries = self.index_items[index.name]
            if old is not None and index.hash_key in old:
                bucket = entries.get(key_bytes(old[index.hash_key]), {})
                bucket.pop(key_id, None)
            if new is not None and self.in_index(index, new):
                entries.setdefault(key_bytes(new[index.hash_key]), {})[key_id] = new
        self._record(old, new, now, by_ttl=by_ttl)
        return old

    def in_index(self, index: Index, item: Mapping[str, Any]) -> bool:
        return all(name in item and next(iter(item[name])) == self.types[name]
                   for name in (index.hash_key, index.range_key) if name)

    def index_view(self, index: Index, item: Mapping[str, Any]) -> dict[str, Any]:
        """What the index holds of ``item`` (its projection)."""
        if index.projection == "ALL":
            return copy_value(dict(item))  # type: ignore[no-any-return]
        names = {*self.key_names, index.hash_key, *([index.range_key] if index.range_key
                                                    else [])}
        if index.projection == "INCLUDE":
            names.update(index.non_key)
        return {n: copy_value(item[n]) for n in names if n in item}

    def partition(self, index: Index | None, hash_value: Any) -> list[dict[str, Any]]:
        """The items under one partition key, in sort-key order (for an index, then in
        table-key order, so equal index keys come back the same way every time)."""
        if index is None:
            part = self.items.get(key_bytes(hash_value), {})
            if self.range_key is None:
                return list(part.values())
            ranged: str = self.range_key
            return sorted(part.values(), key=lambda it: sort_key(it[ranged]))
        bucket = self.index_items[index.name].get(key_bytes(hash_value), {})
        return sorted(bucket.values(), key=self._index_order(index))

    def _index_order(self, index: Index) -> Callable[[Mapping[str, Any]], Any]:
        names = ([index.range_key] if index.range_key else []) + list(self.key_names)
        return lambda it: tuple(sort_key(it[n]) for n in names)

    def scan_order(self, index: Index | None) -> Iterator[dict[str, Any]]:
        """Every item (or index entry), partitions in hash order as DynamoDB scans them."""
        source = self.items if index is None else self.index_items[index.name]
        hashed = sorted(source, key=lambda k: hashlib.md5(repr(k).encode()).digest())
        for part in hashed:
            if index is None:
                rng = self.range_key
                yield from (sorted(self.items[part].values(), key=lambda it: sort_key(it[rng]))
                            if rng else list(self.items[part].values()))
            else:
                yield from sorted(source[part].values(), key=self._index_order(index))

    # -- stream -------------------------------------------------------------------------

    def _record(self, old: dict[str, Any] | None, new: dict[str, Any] | None, now: float,
                *, by_ttl: bool) -> None:
        if self.stream_view is None or items_equal(old, new):
            return  # DynamoDB writes no stream record for a write that changed nothing
        event = "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"
        sequence = f"{len(self.stream) + 1:021d}"
        source = new if new is not None else old
        assert source is not None
        ddb: dict[str, Any] = {
            "ApproximateCreationDateTime": datetime.fromtimestamp(int(now), UTC),
            "Keys": self.key_of(source),
            "SequenceNumber": sequence,
            "SizeBytes": item_size(self.key_of(source)) + item_size(new) + item_size(old),
            "StreamViewType": self.stream_view,
        }
        if new is not None and self.stream_view in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES"):
            ddb["NewImage"] = copy_value(new)
        if old is not None and self.stream_view in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES"):
            ddb["OldImage"] = copy_value(old)
        record: dict[str, Any] = {
            "eventID": hashlib.sha1(f"{self.name}/{sequence}".encode()).hexdigest()[:32],
            "eventName": event, "eventVersion": "1.1", "eventSource": "aws:dynamodb",
            "awsRegion": self.region, "dynamodb": ddb,
        }
        if by_ttl:
            record["userIdentity"] = {"type": "Service",
                                      "principalId": "dynamodb.amazonaws.com"}
        self.stream.append(record)

    def describe(self) -> dict[str, Any]:
        count = sum(len(p) for p in self.items.values())
        desc: dict[str, Any] = {
            "TableName": self.name, "TableStatus": "ACTIVE",
            "KeySchema": [{"AttributeName": n, "KeyType": t}
                          for n, t in zip(self.key_names, ("HASH", "RANGE"), strict=False)],
            "AttributeDefinitions": [{"AttributeName": n, "AttributeType": t}
                                     for n, t in self.types.items()],
            "ItemCount": count,
            "TableSizeBytes": sum(item_size(it) for p in self.items.values()
                                  for it in p.values()),
            "TableArn": f"arn:aws:dynamodb:{self.region}:000000000000:table/{self.name}",
            "CreationDateTime": self.created,
            "BillingModeSummary": {"BillingMode": "PAY_PER_REQUEST"},
        }
        if self.indexes:
            desc["GlobalSecondaryIndexes"] = [{
                "IndexName": i.name, "IndexStatus": "ACTIVE",
                "KeySchema": [{"AttributeName": n, "KeyType": t} for n, t in
                              zip((i.hash_key, i.range_key), ("HASH", "RANGE"), strict=True)
                              if n],
                "Projection": {"ProjectionType": i.projection,
                               **({"NonKeyAttributes": list(i.non_key)} if i.non_key else {})},
            } for i in self.indexes.values()]
        if self.stream_view is not None:
            desc["StreamSpecification"] = {"StreamEnabled": True,
                                           "StreamViewType": self.stream_view}
            desc["LatestStreamArn"] = self.stream_arn
            desc["LatestStreamLabel"] = str(self.stream_arn).rpartition("/")[2]
        return desc


class Database(Protocol):
    """What the request handlers (``reads.py``, ``writes.py``) use of the twin
    (:class:`~whimbrel.store.memory.dynamodb.MemoryDynamoDB`, which dispatches to them):
    its tables by name and its clock. Declared here, below both, so neither imports it."""

    clock: Callable[[], float]

    def table(self, name: object) -> Table: ...


def capacity(params: Mapping[str, Any], table: str, units: float,
             indexes: Mapping[str, float] | None = None, *, write: bool) -> dict[str, Any]:
    """The ``ConsumedCapacity`` a response carries (nothing unless asked for)."""
    mode = params.get("ReturnConsumedCapacity", "NONE")
    if mode not in ("TOTAL", "INDEXES"):
        return {}
    side = "WriteCapacityUnits" if write else "ReadCapacityUnits"
    total = units + sum((indexes or {}).values())
    entry: dict[str, Any] = {"TableName": table, "CapacityUnits": total, side: total}
    if mode == "INDEXES":
        entry["Table"] = {"CapacityUnits": units, side: units}
        if indexes:
            entry["GlobalSecondaryIndexes"] = {
                name: {"CapacityUnits": u, side: u} for name, u in indexes.items()}
    return {"ConsumedCapacity": entry}
