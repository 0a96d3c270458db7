"""The vocabulary of :mod:`whimbrel.store.specs`: what a table, an index, a key and an
attribute's kind are, and the ``create_table`` request of a table. The tables themselves
are described in ``specs.py`` only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from whimbrel.settings import DEFAULT_TABLE_PREFIX

AttrType = Literal["S", "N"]
#: What an attribute holds (the item's schema, declared once here; the codec and the
#: agreement test read it): ``S`` text, ``N`` a number read as float, ``I`` a number read
#: as int, ``BOOL``, ``J`` a payload (JSON text, or a native DynamoDB value that a raw
#: client wrote; read back as JSON text), ``H`` a state history (list of maps), ``SL`` a
#: list of text.
AttrKind = Literal["S", "N", "I", "BOOL", "J", "H", "SL"]
ATTR_KINDS: tuple[str, ...] = ("S", "N", "I", "BOOL", "J", "H", "SL")
Projection = Literal["KEYS_ONLY", "INCLUDE", "ALL"]

TTL_ATTRIBUTE = "expires_epoch"


def attributes(text: str) -> dict[str, AttrKind]:
    """``"name:kind name:kind ..."`` (kind ``S`` when left out) as a schema mapping."""
    out: dict[str, AttrKind] = {}
    for word in text.split():
        name, _, kind = word.partition(":")
        if (kind or "S") not in ATTR_KINDS:
            raise ValueError(f"{name}: unknown attribute kind {kind!r}")
        out[name] = kind or "S"  # type: ignore[assignment]
    return out


@dataclass(frozen=True)
class Key:
    name: str
    type: AttrType = "S"


@dataclass(frozen=True)
class IndexSpec:
    """A global secondary index. All ours are sparse or keys-only to keep writes cheap."""

    name: str
    hash_key: Key
    range_key: Key | None = None
    projection: Projection = "KEYS_ONLY"
    #: With ``INCLUDE``: the non-key attributes copied into the index.
    non_key_attributes: tuple[str, ...] = ()
    purpose: str = ""


@dataclass(frozen=True)
class TableSpec:
    logical_name: str
    hash_key: Key
    range_key: Key | None = None
    indexes: tuple[IndexSpec, ...] = ()
    stream: Literal["NEW_IMAGE", "NEW_AND_OLD_IMAGES"] | None = None
    ttl_attribute: str | None = TTL_ATTRIBUTE
    purpose: str = ""
    #: Every attribute an item may hold, keys and index keys included.
    attributes: Mapping[str, AttrKind] = field(default_factory=dict)

    def table_name(self, prefix: str = DEFAULT_TABLE_PREFIX) -> str:
        return f"{prefix}{self.logical_name}"

    def attribute_definitions(self) -> list[Key]:
        keys: dict[str, Key] = {}
        for k in (self.hash_key, self.range_key):
            if k:
                keys[k.name] = k
        for idx in self.indexes:
            for k in (idx.hash_key, idx.range_key):
                if k:
                    keys[k.name] = k
        return list(keys.values())

    def kind(self, attribute: str) -> AttrKind:
        """The declared kind of ``attribute`` (KeyError: not in the schema)."""
        return self.attributes[attribute]

    def index(self, name: str) -> IndexSpec:
        for idx in self.indexes:
            if idx.name == name:
                return idx
        raise KeyError(name)


def create_table_request(spec: TableSpec, prefix: str) -> dict[str, Any]:
    """The boto3 ``create_table`` arguments for ``spec`` (on-demand billing)."""
    key_schema = [{"AttributeName": spec.hash_key.name, "KeyType": "HASH"}]
    if spec.range_key:
        key_schema.append({"AttributeName": spec.range_key.name, "KeyType": "RANGE"})
    req: dict[str, Any] = {
        "TableName": spec.table_name(prefix),
        "KeySchema": key_schema,
        "AttributeDefinitions": [
            {"AttributeName": k.name, "AttributeType": k.type} for k in spec.attribute_definitions()
        ],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if spec.indexes:
        gsis = []
        for idx in spec.indexes:
            ks = [{"AttributeName": idx.hash_key.name, "KeyType": "HASH"}]
            if idx.range_key:
                ks.append({"AttributeName": idx.range_key.name, "KeyType": "RANGE"})
            gsis.append(
                {
                    "IndexName": idx.name,
                    "KeySchema": ks,
                    "Projection": {"ProjectionType": idx.projection,
                                   **({"NonKeyAttributes": list(idx.non_key_attributes)}
                                      if idx.projection == "INCLUDE" else {})},
                }
            )
        req["GlobalSecondaryIndexes"] = gsis
    if spec.stream:
        req["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": spec.stream}
    return req
