"""The lean transport: DynamoDB JSON in and out, signed and sent the way botocore would.

botocore spends about 1 ms of CPU on each request (parameter validation, endpoint
rules, event hooks, response parsing) where the request itself takes well under 1 ms on
a local endpoint; the engine's few hot moves pay that on every activity, and on two
cores it is what limits a wide fan-out (docs/benchmarks.md). This client skips that
work and takes every *decision* from a botocore client built once
(:func:`whimbrel.store.transport.resolve`): the endpoint botocore resolved (custom,
``AWS_ENDPOINT_URL_DYNAMODB``, FIPS, dual-stack, the ``amazonaws.com.cn`` partition),
botocore's own HTTP session (proxies from the config or ``HTTPS_PROXY``, the CA bundle
from the config or ``AWS_CA_BUNDLE``, timeouts, pool size, client certificates), its
credentials (SigV4 with botocore's signer, so session tokens and refresh work as in
boto3), its User-Agent and its retry mode and attempts (:class:`RetryPolicy`).

Every failure goes through the store's one translator (:func:`~whimbrel.store.errors.
translate`); retries are counted on the observers (the store's meter).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import BotoCoreError, SSLError

from whimbrel.contract.errors import StoreError
from whimbrel.store.errors import (
    RETRYABLE_CODES,
    THROTTLING_CODES,
    ConditionLost,
    RetryPolicy,
    translate,
)

__all__ = ["RETRYABLE_CODES", "ConditionLost", "LeanTransport",
           "Resolved", "RequestObserver", "RetryObserver"]

TARGET_PREFIX = "DynamoDB_20120810."


class RequestObserver(Protocol):
    """Sees every request and its response (None when it failed); used for metering."""

    def __call__(self, operation: str, params: dict[str, Any],
                 response: dict[str, Any] | None) -> None: ...


class RetryObserver(Protocol):
    """Told of every retry: why (AWS code, ``HTTP 5xx``, ``connection``) and the wait."""

    def __call__(self, operation: str, reason: str, delay: float, *,
                 throttled: bool) -> None: ...


@dataclass(frozen=True)
class Resolved:
    """What a botocore client decided for DynamoDB, read once."""

    url: str
    region: str
    signing_name: str
    user_agent: str | None
    #: Returns botocore's credentials object (refreshable), or None when there are none
    #: (yet): asked again until it finds some, as botocore's client would.
    credentials: Callable[[], Any]
    #: botocore's ``URLLib3Session`` of that client (proxies, CA bundle, timeouts, pool).
    http_session: Any
    retry: RetryPolicy


class LeanTransport:
    """Thread-safe; share one per store."""

    name = "lean"

    def __init__(self, resolved: Resolved, *,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.resolved = resolved
        self.url = resolved.url
        self.region = resolved.region
        self.retry = resolved.retry
        self.observers: list[RequestObserver] = []
        self.retry_observers: list[RetryObserver] = []
        self._sleep = sleep
        self._credentials: Any = None
        self._lock = threading.Lock()
        self._headers = {"Content-Type": "application/x-amz-json-1.0"}
        if resolved.user_agent:
            self._headers["User-Agent"] = resolved.user_agent

    @property
    def max_attempts(self) -> int:
        return self.retry.max_attempts

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
                if attempt >= self.retry.max_attempts:
                    self._observe(operation, params, None)
                    raise translate(operation, exc.code,
                                    f"{exc.message} (after {attempt} attempts)") from None
                delay = self.retry.delay(attempt, exc.code)
                for retry_observer in self.retry_observers:
                    retry_observer(operation, exc.reason, delay,
                                   throttled=exc.code in THROTTLING_CODES)
                self._sleep(delay)
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

    def _signed(self, operation: str, body: bytes) -> Any:
        creds = self._credentials
        if creds is None:
            with self._lock:
                if self._credentials is None:
                    self._credentials = self.resolved.credentials()
                creds = self._credentials
        if creds is None:
            raise StoreError("Unable to locate credentials (set AWS_ACCESS_KEY_ID/"
                             "AWS_SECRET_ACCESS_KEY, a profile or a role; a local endpoint "
                             "accepts any value)", aws_code=None, retryable=False)
        request = AWSRequest(method="POST", url=self.url, data=body, headers={
            **self._headers, "X-Amz-Target": TARGET_PREFIX + operation})
        SigV4Auth(creds.get_frozen_credentials(), self.resolved.signing_name,
                  self.region).add_auth(request)
        return request.prepare()

    def _send(self, operation: str, body: bytes) -> dict[str, Any]:
        prepared = self._signed(operation, body)
        try:
            resp = self.resolved.http_session.send(prepared)
        except SSLError as exc:  # a certificate problem does not heal by retrying
            raise StoreError(f"{operation}: {exc}", aws_code=None, retryable=False) from exc
        except BotoCoreError as exc:  # refused, reset, timed out, proxy failed
            raise _Retryable(None, "connection", f"Could not connect to the endpoint URL: "
                             f"{self.url!r} ({type(exc).__name__}: {exc})") from None
        content: bytes = resp.content
        try:
            data: dict[str, Any] = json.loads(content) if content else {}
        except ValueError:
            data = {"message": content[:200].decode("utf-8", "replace")}
        if not isinstance(data, dict):
            data = {"message": str(data)[:200]}
        status = int(resp.status_code)
        if status == 200:
            return data
        code = str(data.get("__type", "")).rpartition("#")[2] or None
        message = str(data.get("message") or data.get("Message") or f"HTTP {status}")
        if code in RETRYABLE_CODES or status >= 500:
            raise _Retryable(code, code or f"HTTP {status}",
                             message if code else f"HTTP {status}: {message}")
        raise translate(operation, code, message, status=status, item=data.get("Item"))


class _Retryable(Exception):
    def __init__(self, code: str | None, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
