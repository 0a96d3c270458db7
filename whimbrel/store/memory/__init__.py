"""The in-memory twin of DynamoDB, behind the store's one seam (the ``Transport``).

The twin emulates DynamoDB, not the store: :class:`MemoryDynamoDB` answers the very
requests the store sends (DynamoDB JSON in and out) and fails them the way the real
transports do (``ConditionLost`` with the item as it is now, ``StoreError`` with
DynamoDB's code and a message close to DynamoDB's). So every part of the store keeps
its own conditional-write logic on the twin by construction, and the store's contract
tests, run on DynamoDB Local and on the twin, check the emulated semantics.

What it emulates: PutItem, UpdateItem, DeleteItem, GetItem, BatchGetItem,
BatchWriteItem, TransactWriteItems, TransactGetItems, Query, Scan, the ``SELECT ... IN``
PartiQL statement the store sends, and table management (Create/Delete/Describe/List
tables, TTL settings); condition, filter, key-condition, update and projection
expressions with names and values (unused or undefined ones refused, reserved words
refused); sparse global secondary indexes with their projections; ``ReturnValues``,
``ReturnValuesOnConditionCheckFailure``; consumed capacity by DynamoDB's rules (1 KB
write / 4 KB read units, index writes, transactions at 2x); the 400 KB item limit, key
type and empty-key checks; and streams (``NEW_AND_OLD_IMAGES`` records with sequence
numbers and creation times from the injected clock, no record for a write that changes
nothing) readable through :class:`MemoryStreams`, a stand-in for the ``dynamodbstreams``
client.

What it does not emulate: throttling, provisioned capacity and on-demand limits
(nothing is ever throttled or retried), eventual consistency (every read is
consistent, index reads included: an index is updated with its item), shard splits and
the 24-hour stream retention (one shard per stream, never closed or trimmed),
TTL deletion on its own (it happens when :meth:`MemoryDynamoDB.expire` is called),
transaction idempotency tokens (``ClientRequestToken``) and
``TransactionConflictException``, the legacy parameters (``Expected``,
``AttributesToGet``, ``KeyConditions``, ``QueryFilter``), local secondary indexes' item
collection limit, ``UPDATED_OLD``/``UPDATED_NEW`` for nested paths (the whole top-level
attribute is returned), PartiQL beyond the ``SELECT ... IN`` shape the store sends, and
exact capacity figures for an item whose size sits within bytes of a unit boundary
(number sizes are approximated as DynamoDB documents them).
"""

from whimbrel.store.memory.dynamodb import MemoryConnection, MemoryDynamoDB, MemoryStreams

__all__ = ["MemoryConnection", "MemoryDynamoDB", "MemoryStreams"]
