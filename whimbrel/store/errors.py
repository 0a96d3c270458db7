"""The one seam where AWS errors become Whimbrel errors, and the one retry policy.

Both transports (:mod:`whimbrel.store.transport`) hand every failed call to
:func:`translate`: a lost condition becomes :class:`ConditionLost` (internal to the
store, which turns it into the engine's terms), everything else
:class:`~whimbrel.contract.errors.StoreError` keeping the AWS code. What is worth
retrying, how often and how long to wait is :class:`RetryPolicy`, read from the
botocore client's resolved configuration (``retries`` mode and attempts, which honour
``AWS_RETRY_MODE``/``AWS_MAX_ATTEMPTS`` and the profile), so the lean path retries
exactly as botocore would.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.retries import standard as _standard

from whimbrel.contract.errors import StoreError

__all__ = ["CONDITION_FAILED", "RETRYABLE_CODES", "THROTTLING_CODES", "ConditionLost",
           "RetryPolicy", "translate"]

CONDITION_FAILED = "ConditionalCheckFailedException"

#: Capacity and throttling codes: retried after the long (throttling) back-off, and
#: counted by the meter (``CapacityMeter.throttles``).
THROTTLING_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "LimitExceededException",
    }
)

#: AWS error codes worth retrying: capacity, throttling, and server-side trouble.
RETRYABLE_CODES = THROTTLING_CODES | frozenset(
    {
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionConflictException",
    }
)


class ConditionLost(Exception):
    """A conditional write lost. ``item`` is the item as it is now (DynamoDB JSON), when
    the request asked for it with ``ReturnValuesOnConditionCheckFailure``; None when the
    item does not exist. Never leaves the store package: the store turns it into the
    engine's terms (False, or ``StateConflict`` with ``current``)."""

    def __init__(self, operation: str, item: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{operation}: condition failed")
        self.item: dict[str, Any] | None = dict(item) if item else None


def translate(operation: str, code: str | None, message: str, *, status: int | None = None,
              item: Mapping[str, Any] | None = None) -> Exception:
    """The exception for a failed DynamoDB call (returned, for the caller to raise
    ``from`` the cause it holds).

    ``code`` is the AWS error code (None for a connection failure or an unreadable
    reply), ``status`` the HTTP status when there was one.
    """
    if code == CONDITION_FAILED:
        return ConditionLost(operation, item)
    if code == "ResourceNotFoundException":
        return StoreError(f"{operation}: table not found ({message}); run "
                          "`whimbrel tables create`", aws_code=code, retryable=False)
    retryable = (code in RETRYABLE_CODES or code is None
                 or (status is not None and status >= 500))
    prefix = f"{operation}: {code}: " if code else f"{operation}: "
    return StoreError(prefix + message, aws_code=code, retryable=retryable)


def _botocore_scales() -> tuple[float, float]:
    """(throttling, other) back-off base of botocore's standard mode for DynamoDB."""
    default: Mapping[str, float] = getattr(_standard.ExponentialBackoff,
                                           "_DEFAULT_BACKOFF_CONFIG", {})
    service: Mapping[str, Mapping[str, float]] = getattr(
        _standard.ExponentialBackoff, "_SERVICE_BACKOFF_CONFIG", {})
    throttling = float(default.get("throttling_base_scale", 1.0))
    other = float(service.get("dynamodb", {}).get(
        "non_throttling_base_scale", default.get("non_throttling_base_scale", 0.05)))
    return throttling, other


@dataclass(frozen=True)
class RetryPolicy:
    """How many tries a call gets and how long to wait between them.

    ``mode`` and ``max_attempts`` come from botocore's resolved config
    (:meth:`from_botocore`); the waits follow botocore's rules for that mode:
    ``standard``/``adaptive`` wait ``rand * min(base * 2**(n-1), 20 s)`` with base 1 s
    after throttling and 25 ms otherwise; ``legacy`` waits ``rand * 0.05 * 2**(n-1)``
    (DynamoDB's legacy rule).
    """

    mode: str = "standard"
    #: Tries in all, the first included.
    max_attempts: int = 3
    max_backoff: float = 20.0
    random: Callable[[], float] = field(default=random.random, compare=False)

    @classmethod
    def from_botocore(cls, retries: Mapping[str, Any] | None) -> RetryPolicy:
        """From a botocore ``Config.retries`` as the client resolved it."""
        retries = retries or {}
        mode = str(retries.get("mode") or "standard")
        total = retries.get("total_max_attempts")
        if total is None and retries.get("max_attempts") is not None:
            total = int(retries["max_attempts"]) + 1  # max_attempts counts retries only
        if total is None:
            total = 10 if mode == "legacy" else 3  # botocore's defaults for DynamoDB
        return cls(mode=mode, max_attempts=max(1, int(total)))

    def delay(self, attempt: int, code: str | None) -> float:
        """Seconds to wait after failed try number ``attempt`` (1-based)."""
        if self.mode == "legacy":
            return float(self.random() * min(0.05 * 2 ** (attempt - 1), self.max_backoff))
        throttling, other = _botocore_scales()
        base = throttling if code in THROTTLING_CODES else other
        return float(self.random() * min(base * 2 ** (attempt - 1), self.max_backoff))
