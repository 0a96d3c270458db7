"""A lean DynamoDB client: JSON in, JSON out, one connection pool, no model layer.

botocore spends about 1 ms of CPU on each request (parameter validation, endpoint
rules, event hooks, response parsing) where the request itself takes well under 1 ms on
a local endpoint; the engine's few hot moves pay that on every activity, and on two
cores it is what limits a wide fan-out (docs/benchmarks.md). This client builds the
DynamoDB JSON body itself, signs it with botocore's own SigV4 signer (so credentials,
session tokens and refresh work exactly as in boto3) and sends it on one urllib3 pool.
It measured 0.75 ms per GetItem against botocore's 1.86 ms here.

Every error is translated at this one seam: a lost condition raises
:class:`ConditionLost` (with the item as it is now, when asked for), everything else
:class:`~whimbrel.contract.errors.StoreError` with the AWS error code, after retrying what
may succeed later (throttling, 5xx, dropped connections) with capped, jittered back-off.
"""

from __future__ import annotations

import json
import random
import threading
import time
from typing import Any, Protocol

import urllib3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.httpsession import get_cert_path
from botocore.session import Session

from whimbrel.contract.errors import StoreError
from whimbrel.store.errors import CONDITION_FAILED, RETRYABLE_CODES

__all__ = ["ConditionLost", "DynamoClient", "RequestObserver", "RETRYABLE_CODES"]

TARGET_PREFIX = "DynamoDB_20120810."


class ConditionLost(Exception):
    """A conditional write lost. ``item`` is the item as it is now (DynamoDB JSON), when
    the request asked for it with ``ReturnValuesOnConditionCheckFailure``; None when the
    item does not exist. Never leaves the store package: the store turns it into the
    engine's terms."""

    def __init__(self, operation: str, item: dict[str, Any] | None) -> None:
        super().__init__(f"{operation}: condition failed")
        self.item = item


class RequestObserver(Protocol):
    """Sees every request and its response (None when it failed); used for metering."""

    def __call__(self, operation: str, params: dict[str, Any],
                 response: dict[str, Any] | None) -> None: ...


class DynamoClient:
    """Thread-safe; share one per store.

    Args:
        endpoint_url: None for AWS (``https://dynamodb.<region>.amazonaws.com``).
        region: signing region.
        max_attempts: tries per request for retryable errors.
        pool_size: connections kept to the endpoint (a busy process has many threads).
    """

    def __init__(self, endpoint_url: str | None, region: str, *, max_attempts: int = 5,
                 pool_size: int = 128, connect_timeout: float = 5.0,
                 read_timeout: float = 30.0) -> None:
        self.url = endpoint_url or f"https://dynamodb.{region}.amazonaws.com"
        self.region = region
        self.max_attempts = max_attempts
        self.observers: list[RequestObserver] = []
        self._session = Session()
        self._credentials: Any = None
        self._lock = threading.Lock()
        kwargs: dict[str, Any] = {}
        if self.url.startswith("https:"):
            kwargs["ca_certs"] = get_cert_path(True)
        self._pool = urllib3.PoolManager(
            num_pools=4, maxsize=pool_size, retries=False, block=False,
            timeout=urllib3.Timeout(connect=connect_timeout, read=read_timeout), **kwargs)

    def _frozen_credentials(self) -> Any:
        creds = self._credentials
        if creds is None:
            with self._lock:
                if self._credentials is None:
                    self._credentials = self._session.get_credentials()
                creds = self._credentials
        if creds is None:
            raise StoreError("Unable to locate credentials (set AWS_ACCESS_KEY_ID/"
                             "AWS_SECRET_ACCESS_KEY, a profile or a role; a local endpoint "
                             "accepts any value)", aws_code=None, retryable=False)
        return creds.get_frozen_credentials()

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request; returns the parsed JSON response.

        Raises:
            ConditionLost: a conditional write's condition was false.
            StoreError: anything else, once retries are exhausted or not worth it.
        """
        body = json.dumps(params, separators=(",", ":")).encode()
        attempt = 0
        while True:
            attempt += 1
            try:
                data = self._send(operation, body)
            except _Retryable as exc:
                if attempt >= self.max_attempts:
                    self._observe(operation, params, None)
                    raise StoreError(f"{operation}: {exc.message} (after {attempt} attempts)",
                                     aws_code=exc.code, retryable=True) from None
                time.sleep(min(2.0, 0.05 * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0))
                continue
            except (ConditionLost, StoreError):
                self._observe(operation, params, None)
                raise
            self._observe(operation, params, data)
            return data

    def _observe(self, operation: str, params: dict[str, Any],
                 response: dict[str, Any] | None) -> None:
        for observer in self.observers:
            observer(operation, params, response)

    def _send(self, operation: str, body: bytes) -> dict[str, Any]:
        request = AWSRequest(method="POST", url=self.url, data=body, headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": TARGET_PREFIX + operation,
        })
        SigV4Auth(self._frozen_credentials(), "dynamodb", self.region).add_auth(request)
        try:
            resp = self._pool.request("POST", self.url, body=body,
                                      headers=dict(request.headers.items()))
        except urllib3.exceptions.HTTPError as exc:  # refused, reset, timed out
            raise _Retryable(None, f"Could not connect to the endpoint URL: {self.url!r} "
                                   f"({type(exc).__name__}: {exc})") from None
        try:
            data: dict[str, Any] = json.loads(resp.data) if resp.data else {}
        except ValueError:
            data = {"message": resp.data[:200].decode("utf-8", "replace")}
        if resp.status == 200:
            return data
        code = str(data.get("__type", "")).rpartition("#")[2] or None
        message = str(data.get("message") or data.get("Message") or f"HTTP {resp.status}")
        if code == CONDITION_FAILED:
            raise ConditionLost(operation, data.get("Item"))
        if code in RETRYABLE_CODES or resp.status >= 500:
            raise _Retryable(code, f"{code}: {message}")
        if code == "ResourceNotFoundException":
            raise StoreError(f"{operation}: table not found ({message}); run "
                             "`whimbrel tables create`", aws_code=code, retryable=False)
        raise StoreError(f"{operation}: {code}: {message}", aws_code=code, retryable=False)


class _Retryable(Exception):
    def __init__(self, code: str | None, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

