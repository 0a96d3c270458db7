"""The one seam where AWS and PynamoDB errors become Whimbrel errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError
from pynamodb.exceptions import PynamoDBException

from whimbrel.contract.errors import StoreError

CONDITION_FAILED = "ConditionalCheckFailedException"

#: AWS error codes worth retrying: capacity, throttling, and server-side trouble.
RETRYABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionConflictException",
        "LimitExceededException",
    }
)


class ConditionFailed(Exception):
    """Internal signal: a conditional write lost. Callers turn it into StateConflict
    with the state they read back; it never leaves the store package."""


def aws_code(exc: BaseException) -> str | None:
    if isinstance(exc, PynamoDBException):
        try:
            return exc.cause_response_code
        except AttributeError:  # a botocore error without a response (a broken reply)
            return None
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


@contextmanager
def translated(operation: str) -> Iterator[None]:
    """Run a DynamoDB call; lost conditions raise ConditionFailed, the rest StoreError.

    Raises:
        ConditionFailed: the write's condition was false.
        StoreError: anything else, with the AWS code and whether a retry may help.
    """
    try:
        yield
    except (PynamoDBException, ClientError) as exc:
        code = aws_code(exc)
        if code == CONDITION_FAILED:
            raise ConditionFailed(operation) from exc
        message = str(getattr(exc, "cause_response_message", None) or exc)
        if code == "ResourceNotFoundException":
            message = f"{operation}: table not found ({message}); run `whimbrel tables create`"
            raise StoreError(message, aws_code=code, retryable=False) from exc
        retryable = code in RETRYABLE_CODES or code is None
        raise StoreError(f"{operation}: {code}: {message}", aws_code=code,
                         retryable=retryable) from exc
    except BotoCoreError as exc:  # connection failures, read timeouts
        raise StoreError(f"{operation}: {exc}", aws_code=None, retryable=True) from exc
