"""Payloads in S3: values too large to keep well in an item, written to the payload
bucket before the item that references them, read back whole once per process.

* **Keys.** ``<prefix>runs/<workflow_exec_id>/<sha256 of the JSON>.json`` (``.json.gz``
  when kept gzip-compressed, store/blob_codec.py): scoped by
  the run (so a run's objects can be deleted with it) and addressed by content (so a
  redelivered or retried write puts the same key again, never a second object).
* **Order.** The object is written before the item (:class:`OffloadingTransport` puts
  it inside the write's own call, before DynamoDB is asked): a crash between the two
  leaves an orphan object — expired by the bucket's lifecycle rule — never an item
  that references nothing.
* **Reads.** A reference is resolved only by a reader that needs the value (an
  attempt's input, an upstream's output, a view), never by a guard: the store's records
  keep the reference text as read. Each object is fetched once per process (a cache
  bounded in bytes, one fetch at a time per key).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from functools import partial
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from whimbrel.contract.errors import InvalidInput, PayloadMissing
from whimbrel.contract.ids import parse_activity_exec_id, workflow_exec_id_for
from whimbrel.contract.payloads import REF_SCHEME, PayloadLimits, is_ref, parse_ref
from whimbrel.store.blob_codec import GZIP_SUFFIX, decode, encode
from whimbrel.store.errors import THROTTLING_CODES, translate
from whimbrel.store.lean import RequestObserver, RetryObserver
from whimbrel.store.meter import CapacityMeter
from whimbrel.store.plumbing import Client

__all__ = ["CACHE_BYTES", "OFFLOADED", "OffloadingTransport", "PayloadBlobs"]

#: Attributes a large value may be kept apart from, by logical table: only those whose
#: readers resolve a reference (the engine's payload readers and views).
OFFLOADED: Mapping[str, frozenset[str]] = {
    "workflow_request": frozenset({"input"}),
    "workflow_exec": frozenset({"input", "output"}),
    "workflow_exec_data": frozenset({"input"}),
    "activity_exec": frozenset({"input", "output", "late_output"}),
    "map_item": frozenset({"input", "output", "late_output"}),
    "activity_event": frozenset({"output"}),
    "signal": frozenset({"payload"}),
}
#: Bytes of payloads one process keeps once read (a 50 MB value fits several times).
CACHE_BYTES = 256 * 1024 * 1024
_MISSING_CODES = frozenset({"NoSuchKey", "NoSuchBucket", "404", "NotFound", "AccessDenied",
                            "403", "InvalidObjectState"})
#: ``#name = :value`` in an UpdateExpression's SET (the codec's Expression writes these).
_ASSIGN = re.compile(r"(#\w+) = (:\w+)(?=\s*(?:,|$|REMOVE))")


class PayloadBlobs:
    """The payload bucket of one store (``bucket`` None: nothing is written to S3, but a
    reference a raw row wrote is still read). Thread-safe.

    Args:
        bucket: where large payloads go (None: none are kept apart).
        prefix: the start of every key Whimbrel writes.
        threshold: a value larger than this (bytes of JSON) is kept in S3.
        max_bytes: the largest value accepted with a bucket.
        client: makes the S3 client (called once, on first use).
        meter: counts S3 requests and bytes.
        hooks: called around every object write (``phase``, ``"PutObject"``,
            ``"payload"``), as the store's write hooks are around its writes.
        compress: gzip a value when that saves enough (store/blob_codec.py); False
            keeps every object as plain JSON (what a reader of any age reads).
    """

    def __init__(self, *, bucket: str | None, prefix: str, threshold: int, max_bytes: int,
                 client: Callable[[], Any], meter: CapacityMeter,
                 hooks: list[Callable[[str, str, str], None]] | None = None,
                 compress: bool = True) -> None:
        if bucket is not None and not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
            raise InvalidInput(f"payload_bucket must be an S3 bucket name, not {bucket!r}",
                               field="payload_bucket")
        if threshold < 1 or max_bytes < threshold:
            raise InvalidInput("payload thresholds must satisfy 1 <= threshold <= max_bytes"
                               f", not {threshold} and {max_bytes}", field="payload_max_bytes")
        self.bucket = bucket
        self.prefix = prefix
        self.threshold = threshold
        self.limits = PayloadLimits(bucket=bucket, max_bytes=max_bytes)
        self.meter = meter
        self.hooks = hooks if hooks is not None else []
        self.compress = compress
        self._make_client = client
        self._client: Any = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._cached_bytes = 0
        self._fetching: dict[str, Future[str]] = {}

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def key_for(self, scope: str, text: str, gzipped: bool = False) -> str:
        digest = hashlib.sha256(text.encode()).hexdigest()
        return f"{self.prefix}runs/{scope}/{digest}{GZIP_SUFFIX if gzipped else '.json'}"

    def run_prefix(self, workflow_exec_id: str) -> str:
        return f"{self.prefix}runs/{workflow_exec_id}/"

    def put(self, scope: str, text: str) -> str:
        """Write ``text`` under its key in ``scope`` (a run's id); returns the reference.

        Raises:
            StoreError: S3 refused or failed the write.
        """
        if self.bucket is None:
            raise InvalidInput("no payload_bucket to keep a large payload in",
                               field="payload_bucket")
        body, gzipped = encode(text, compress=self.compress)
        key = self.key_for(scope, text, gzipped)
        extra = {"ContentEncoding": "gzip"} if gzipped else {}
        for hook in self.hooks:
            hook("before", "PutObject", "payload")
        self._s3("PutObject", key, lambda: self.client.put_object(
            Bucket=self.bucket, Key=key, Body=body, ContentType="application/json",
            **extra))
        self.meter.record_s3("PutObject", len(body))
        for hook in self.hooks:
            hook("after", "PutObject", "payload")
        ref = f"{REF_SCHEME}{self.bucket}/{key}"
        self._remember(ref, text)  # the writer's own readers need no GET
        return ref

    def adopt(self, scope: str, ref: str) -> str:
        """``ref`` itself, or — when it names an object of another run's prefix in this
        bucket — a copy of that object under ``scope``'s prefix (server-side, same name).

        A run that holds another run's reference (a fork's kept outputs, a parent's
        attempt holding its child's output) would read nothing once the other run
        expired and its prefix was deleted (store/blob_expiry.py): each run reads only
        objects under its own prefix, which go with it.

        Raises:
            StoreError: S3 refused or failed the copy (the source is gone, say).
        """
        try:
            bucket, key = parse_ref(ref)
        except InvalidInput:
            return ref  # a reader says what is wrong with it; a write moves nothing
        runs = f"{self.prefix}runs/"
        if bucket != self.bucket or not key.startswith(runs):
            return ref  # an object of the caller's own (a raw row's): not ours to move
        owner, _, name = key[len(runs):].partition("/")
        if owner == scope or not name or scope.startswith("_"):
            return ref  # its own, or no run known to copy it for (_scope's fallback)
        new_key = f"{runs}{scope}/{name}"
        for hook in self.hooks:
            hook("before", "CopyObject", "payload")
        self._s3("CopyObject", new_key, lambda: self.client.copy_object(
            Bucket=self.bucket, Key=new_key, CopySource={"Bucket": bucket, "Key": key},
            MetadataDirective="COPY"))
        self.meter.record_s3("CopyObject", 0)
        for hook in self.hooks:
            hook("after", "CopyObject", "payload")
        new_ref = f"{REF_SCHEME}{self.bucket}/{new_key}"
        with self._lock:
            known = self._cache.get(ref)
        if known is not None:
            self._remember(new_ref, known)
        return new_ref

    def text(self, ref: str, field: str = "payload") -> str:
        """The JSON text a reference names (fetched once per process).

        Raises:
            PayloadMissing: the object is missing or cannot be read (naming it).
            InvalidInput: ``ref`` is not ``s3://bucket/key``.
        """
        bucket, key = parse_ref(ref, field)
        with self._lock:
            if ref in self._cache:
                self._cache.move_to_end(ref)
                return self._cache[ref]
            running = self._fetching.get(ref)
            mine = running is None
            if running is None:
                running = self._fetching[ref] = Future()
        if not mine:
            return running.result()
        try:
            text = self._fetch(ref, bucket, key)
        except BaseException as exc:
            with self._lock:
                self._fetching.pop(ref, None)
            running.set_exception(exc)
            raise
        self._remember(ref, text)  # cached before it stops being fetched: one GET
        with self._lock:
            self._fetching.pop(ref, None)
        running.set_result(text)
        return text

    def resolve(self, text: str | None, field: str = "payload") -> str | None:
        """``text`` itself, or the value its reference names."""
        return self.text(text, field) if is_ref(text) and text is not None else text

    def delete_run(self, workflow_exec_id: str) -> int:
        """Delete the objects of one run (its items expired); returns how many."""
        if self.bucket is None:
            return 0
        prefix = self.run_prefix(workflow_exec_id)
        deleted = 0
        token: str | None = None
        while True:
            params: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
            if token:
                params["ContinuationToken"] = token
            page = self._s3("ListObjectsV2", prefix,
                            partial(self.client.list_objects_v2, **params))
            self.meter.record_s3("ListObjectsV2", 0)
            keys = [{"Key": o["Key"]} for o in page.get("Contents") or ()]
            if keys:
                done = self._s3("DeleteObjects", prefix, partial(
                    self.client.delete_objects, Bucket=self.bucket,
                    Delete={"Objects": keys, "Quiet": True}))
                self.meter.record_s3("DeleteObjects", 0)
                # A key already gone is no error in S3; one S3 could not delete is (a
                # redelivery tries what is left again).
                failed = done.get("Errors") or ()
                if failed:
                    first = failed[0]
                    raise translate("DeleteObjects", first.get("Code"),
                                    f"s3://{self.bucket}/{first.get('Key')}: "
                                    f"{first.get('Message')} ({len(failed)} not deleted)")
                deleted += len(keys)
            token = page.get("NextContinuationToken")
            if not token:
                return deleted

    def _fetch(self, ref: str, bucket: str, key: str) -> str:
        def get() -> bytes:
            body: bytes = self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
            return body
        try:
            data = get()
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code") or "")
            if code in _MISSING_CODES:
                raise PayloadMissing(ref, f"{code} ({error.get('Message') or 'no message'})",
                                     aws_code=code) from exc
            raise PayloadMissing(ref, f"{code}: {error.get('Message')}", aws_code=code,
                                 retryable=code in THROTTLING_CODES or code.startswith("5")
                                 or code in ("InternalError", "SlowDown")) from exc
        except BotoCoreError as exc:
            raise PayloadMissing(ref, str(exc), retryable=True) from exc
        self.meter.record_s3("GetObject", len(data))
        try:
            return decode(data)
        except ValueError as exc:
            raise PayloadMissing(ref, str(exc)) from None

    def _s3(self, operation: str, key: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise translate(operation, error.get("Code"),
                            f"s3://{self.bucket}/{key}: {error.get('Message') or exc}",
                            status=exc.response.get("ResponseMetadata", {})
                            .get("HTTPStatusCode")) from exc
        except BotoCoreError as exc:
            raise translate(operation, None, f"s3://{self.bucket}/{key}: {exc}") from exc

    def _remember(self, ref: str, text: str) -> None:
        size = len(text)
        if size > CACHE_BYTES // 2:
            return
        with self._lock:
            if ref in self._cache:
                return
            self._cache[ref] = text
            self._cached_bytes += size
            while self._cached_bytes > CACHE_BYTES:
                _, old = self._cache.popitem(last=False)
                self._cached_bytes -= len(old)


def _scope(table: str, item: Mapping[str, Any]) -> str:
    """The run an item belongs to (its objects' key scope), from its key or attributes."""
    def text(name: str) -> str | None:
        value = item.get(name)
        return value.get("S") if isinstance(value, Mapping) else None

    wx = text("workflow_exec_id")
    if wx:
        return wx
    aeid = text("activity_exec_id")
    if aeid:
        try:
            return parse_activity_exec_id(aeid).workflow_exec_id
        except InvalidInput:
            pass
    request_id = text("workflow_request_id")
    if request_id:
        return workflow_exec_id_for(request_id)
    return f"_{table}"


class OffloadingTransport:
    """A transport that keeps large payload attributes in S3: before a write is sent,
    each offloadable attribute (:data:`OFFLOADED`) whose text is over the threshold is
    written to the bucket and replaced by its reference. Every path that writes a
    payload — the Python API, the Simple API's rows, the engine's own moves — goes
    through here, so none can write a large value into an item."""

    def __init__(self, inner: Client, blobs: PayloadBlobs,
                 tables: Mapping[str, str]) -> None:
        self.inner = inner
        self.blobs = blobs
        #: Physical table name -> logical name, for the tables with offloaded attributes.
        self.tables = {name: logical for name, logical in tables.items()
                       if logical in OFFLOADED}

    def __getattr__(self, name: str) -> Any:  # name, url, region, retry of the inner one
        return getattr(self.inner, name)

    @property
    def observers(self) -> list[RequestObserver]:
        return self.inner.observers

    @property
    def retry_observers(self) -> list[RetryObserver]:
        return self.inner.retry_observers

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        if operation in ("PutItem", "UpdateItem"):
            params = self._one(params, operation)
        elif operation == "TransactWriteItems":
            params = {**params, "TransactItems": [
                {kind: self._one(body, "PutItem" if kind == "Put" else "UpdateItem")
                 if kind in ("Put", "Update") else body for kind, body in entry.items()}
                for entry in params.get("TransactItems", ())]}
        elif operation == "BatchWriteItem":
            params = {**params, "RequestItems": {
                table: [self._put_request(table, r) for r in requests]
                for table, requests in params.get("RequestItems", {}).items()}}
        return self.inner.call(operation, params)

    def _put_request(self, table: str, request: dict[str, Any]) -> dict[str, Any]:
        put = request.get("PutRequest")
        if not put:
            return request
        done = self._one({"TableName": table, **put}, "PutItem")
        return {"PutRequest": {k: v for k, v in done.items() if k != "TableName"}}

    def _one(self, params: dict[str, Any], operation: str) -> dict[str, Any]:
        logical = self.tables.get(str(params.get("TableName")))
        if logical is None:
            return params
        attrs = OFFLOADED[logical]
        if operation == "PutItem":
            item = params.get("Item") or {}
            found = [a for a in attrs if self._moves(item.get(a))]
            if not found:
                return params
            scope = _scope(logical, item)
            new = dict(item)
            for a in found:
                new[a] = {"S": self._kept(scope, item[a]["S"])}
            return {**params, "Item": new}
        names = params.get("ExpressionAttributeNames") or {}
        values = params.get("ExpressionAttributeValues") or {}
        targets = [v for n, v in _ASSIGN.findall(str(params.get("UpdateExpression", "")))
                   if names.get(n) in attrs and self._moves(values.get(v))]
        if not targets:
            return params
        scope = _scope(logical, params.get("Key") or {})
        new_values = dict(values)
        for v in targets:
            new_values[v] = {"S": self._kept(scope, values[v]["S"])}
        return {**params, "ExpressionAttributeValues": new_values}

    def _moves(self, value: Any) -> bool:
        """A value this write keeps apart: text over the threshold, or a reference
        (which may name another run's object, :meth:`PayloadBlobs.adopt`)."""
        if not isinstance(value, Mapping):
            return False
        return is_ref(value.get("S")) or _over(value, self.blobs.threshold)

    def _kept(self, scope: str, text: str) -> str:
        return self.blobs.adopt(scope, text) if is_ref(text) else self.blobs.put(scope, text)


def _over(value: Any, threshold: int) -> bool:
    """A text attribute value longer than ``threshold`` bytes (not a reference)."""
    if not isinstance(value, Mapping):
        return False
    text = value.get("S")
    if not isinstance(text, str) or len(text) * 4 <= threshold or is_ref(text):
        return False
    return len(text) > threshold or len(text.encode()) > threshold
