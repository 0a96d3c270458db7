"""A run's payload objects deleted when its run item expires (issue 27, "nothing leaks").

DynamoDB's TTL deletes an expired ``workflow_exec`` item and announces it on the table's
stream as a ``REMOVE`` record whose ``userIdentity`` is the DynamoDB service. The
``payload_expiry`` consumer (store/consumers.py) gets only those records; for each, the
objects under ``<prefix>runs/<workflow_exec_id>/`` are deleted.

Only TTL removals, not every ``REMOVE`` of a run item: Whimbrel never deletes a run
item itself, so any other removal is a person's ``DeleteItem`` — a mistake a
point-in-time restore can undo, and a restored item must find its objects there. Those
objects are left to the bucket's lifecycle rule, which catches every orphan anyway.

Idempotent: a redelivered record lists the prefix again and finds it empty (or holding
what the first delivery did not reach); deleting a key that is gone is not an error in
S3. Objects of other runs are never touched: the store copies a payload another run
references into the referencing run's own prefix (store/blobs.py), so no run reads an
object under a prefix that expires before it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from whimbrel.store.blobs import PayloadBlobs

__all__ = ["TTL_IDENTITY", "ExpiredPayloads", "expire_run_payloads", "expired_run"]

#: The ``userIdentity`` of a stream record of an item TTL deleted (DynamoDB Streams docs,
#: "Time to Live": type ``Service``, principal ``dynamodb.amazonaws.com``).
TTL_IDENTITY: Mapping[str, str] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


@dataclass(frozen=True)
class ExpiredPayloads:
    """What one stream record did: the run whose objects were deleted (None: the record
    is no TTL removal of a run item, and nothing was done), and how many objects."""

    workflow_exec_id: str | None
    deleted: int = 0
    reason: str = ""


def expired_run(record: Mapping[str, Any]) -> str | None:
    """The ``workflow_exec_id`` of a TTL removal of a run item, else None."""
    if record.get("eventName") != "REMOVE":
        return None
    identity = record.get("userIdentity")
    if not isinstance(identity, Mapping) or any(
            identity.get(k) != v for k, v in TTL_IDENTITY.items()):
        return None
    ddb = record.get("dynamodb")
    keys = ddb.get("Keys") if isinstance(ddb, Mapping) else None
    typed = keys.get("workflow_exec_id") if isinstance(keys, Mapping) else None
    wx = typed.get("S") if isinstance(typed, Mapping) else None
    # A key with a "/" could name another prefix's objects: no run id has one.
    return wx if isinstance(wx, str) and wx and "/" not in wx else None


def expire_run_payloads(blobs: PayloadBlobs, record: Mapping[str, Any]) -> ExpiredPayloads:
    """Delete the objects of the run whose item TTL removed (``record`` from the
    ``workflow_exec`` stream); anything else is left alone.

    Raises:
        StoreError: S3 failed the listing or a deletion (retryable: the record is
            delivered again, and finds what is left).
    """
    wx = expired_run(record)
    if wx is None:
        return ExpiredPayloads(None, reason="not a TTL removal of a run item")
    if blobs.bucket is None:
        return ExpiredPayloads(wx, reason="no payload bucket")
    return ExpiredPayloads(wx, blobs.delete_run(wx))
