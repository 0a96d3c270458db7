"""What every part of the store shares: one :class:`Tables` object holding the transport it
calls, the write hooks, the table names of one prefix, and the few request shapes the
tables use (create, consistent read, paged Query, conditional update, sparse-index reads).

The parts (:mod:`~whimbrel.store.runs`, :mod:`~whimbrel.store.attempts`,
:mod:`~whimbrel.store.cold`, ...) each hold the store's one ``Tables``; none inherits it.

Conditional writes ask for the item as it is when they lose
(``ReturnValuesOnConditionCheckFailure``), so a lost race costs no read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from whimbrel.contract.errors import StoreError
from whimbrel.store import spec_core
from whimbrel.store.codec import Expression, Item, to_ddb
from whimbrel.store.errors import ConditionLost
from whimbrel.store.lean import RequestObserver, RetryObserver

__all__ = ["CAPACITY", "DUE_KEYS_LIMIT", "Client", "Tables", "Write"]


class Client(Protocol):
    """What the tables need of a transport (``whimbrel.store.transport.Transport``)."""

    observers: list[RequestObserver]
    retry_observers: list[RetryObserver]

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]: ...


#: (operation, logical table, thunk) -> result; runs the write-hooks around the thunk.
Write = Callable[[str, str, Callable[[], Any]], Any]

CAPACITY = {"ReturnConsumedCapacity": "INDEXES"}
#: Entries one ``due_keys`` request reads at most (one page; more: ask key by key).
DUE_KEYS_LIMIT = 100

log = logging.getLogger("whimbrel.store")


class Tables:
    """The tables' names for one prefix, and the requests they are written with. One per
    store, shared by its parts. Thread-safe (``partiql`` only ever turns False)."""

    def __init__(self, client: Client, prefix: str, write: Write) -> None:
        self.client = client
        #: Runs the write hooks around one write (``Write``).
        self.write = write
        self.prefix = prefix
        self.workflow_table = spec_core.WORKFLOW_EXEC.table_name(prefix)
        self.data_table = spec_core.WORKFLOW_EXEC_DATA.table_name(prefix)
        self.activity_table = spec_core.ACTIVITY_EXEC.table_name(prefix)
        self.item_table = spec_core.MAP_ITEM.table_name(prefix)
        self.edge_table = spec_core.ACTIVITY_EXEC_DEPENDENCY.table_name(prefix)
        self.attribute_table = spec_core.WORKFLOW_ATTRIBUTE.table_name(prefix)
        #: False once PartiQL was refused here (no ``dynamodb:PartiQLSelect``): Queries.
        self.partiql = True

    def write_call(self, operation: str, logical: str,
                   params: dict[str, Any]) -> dict[str, Any]:
        """One write request, with the write hooks around it.

        Raises:
            ConditionLost: its condition failed (with the item as it is now, if asked).
        """
        resp: dict[str, Any] = self.write(operation, logical,
                                          lambda: self.client.call(operation, params))
        return resp

    def put_new(self, table: str, logical: str, item: Item, key_attr: str) -> bool:
        expr = Expression()
        params = expr.params(TableName=table, Item=item,
                             ConditionExpression=expr.missing(key_attr), **CAPACITY)
        try:
            self.write("PutItem", logical, lambda: self.client.call("PutItem", params))
        except ConditionLost:
            return False
        return True

    def get(self, table: str, key: Item) -> Item | None:
        resp = self.client.call("GetItem", {"TableName": table, "Key": key,
                                            "ConsistentRead": True, **CAPACITY})
        item: Item | None = resp.get("Item")
        return item

    def query(self, params: dict[str, Any], limit: int | None = None) -> Iterator[Item]:
        params = {**params, **CAPACITY}
        left = limit
        while True:
            if left is not None:
                params["Limit"] = left
            resp = self.client.call("Query", params)
            items: list[Item] = resp.get("Items", [])
            yield from items
            if left is not None:
                left -= len(items)
                if left <= 0:
                    return
            start = resp.get("LastEvaluatedKey")
            if not start:
                return
            params["ExclusiveStartKey"] = start

    def select_in(self, table: str, index: str, key_attr: str, keys: Sequence[str], *,
                  where: str = "", values: Sequence[Any] = (), projection: str = "*",
                  limit: int | None = None) -> tuple[list[Item], bool] | None:
        """Entries of the sparse ``index`` under any of the partition keys ``keys`` (and
        ``where``, with ``values`` for its ``?``), in one request: a PartiQL ``SELECT``
        with ``IN`` on the partition key, which DynamoDB answers with a Query of each key,
        never a Scan. Returns the first page (at most ``limit`` entries, by default
        ``DUE_KEYS_LIMIT``) and whether more are there; None when PartiQL is refused here
        (an IAM policy without ``dynamodb:PartiQLSelect``): the caller then asks key by
        key, as this store will from now on."""
        if not self.partiql:
            return None
        if not keys:
            return [], False
        marks = ", ".join("?" for _ in keys)
        params = {"Statement": f'SELECT {projection} FROM "{table}"."{index}" '
                               f'WHERE "{key_attr}" IN [{marks}]{where}',
                  "Parameters": [*({"S": k} for k in keys), *values],
                  "Limit": limit or DUE_KEYS_LIMIT, **CAPACITY}
        try:
            resp = self.client.call("ExecuteStatement", params)
        except StoreError as exc:
            if exc.retryable:
                raise
            log.warning("PartiQL refused (%s); sparse indexes are read key by key", exc)
            self.partiql = False
            return None
        return resp.get("Items", []), bool(resp.get("NextToken"))

    def due_keys(self, table: str, index: str, key_attr: str, sort_attr: str,
                 keys: Sequence[str], now: float) -> set[str] | None:
        """Which of ``keys`` (partition keys of the sparse ``index``, whose sort key is a
        due time) hold an entry due at ``now``, in one request (``select_in``): an idle
        sweep pass asks each index once, not each shard. None when it cannot say (more
        than one page is due, or PartiQL is refused): the caller asks key by key."""
        got = self.select_in(table, index, key_attr, keys, where=f' AND "{sort_attr}" <= ?',
                             values=[to_ddb(now)], projection=f'"{key_attr}"')
        if got is None or got[1]:
            return None
        return {item[key_attr]["S"] for item in got[0]}

    def update(self, logical: str, table: str, key: Item, expr: Expression, update: str,
               condition: str) -> Item:
        """One conditional UpdateItem; returns the new image.

        Raises:
            ConditionLost: with the item as it is now.
        """
        params = expr.params(TableName=table, Key=key, UpdateExpression=update,
                             ConditionExpression=condition, ReturnValues="ALL_NEW",
                             ReturnValuesOnConditionCheckFailure="ALL_OLD", **CAPACITY)
        resp = self.write("UpdateItem", logical, lambda: self.client.call("UpdateItem", params))
        attributes: Item = resp["Attributes"]
        return attributes
