"""The store's one retry policy and transport setting, as read from botocore's config and
the environment (pure: no I/O)."""

from __future__ import annotations

import pytest

from whimbrel.contract.errors import InvalidInput, StoreError
from whimbrel.settings import Settings
from whimbrel.store.errors import ConditionLost, RetryPolicy, translate


@pytest.mark.parametrize(("retries", "want"), [
    (None, RetryPolicy("standard", 3)),
    ({"mode": "standard"}, RetryPolicy("standard", 3)),
    ({"mode": "legacy"}, RetryPolicy("legacy", 10)),
    ({"mode": "adaptive", "max_attempts": 4}, RetryPolicy("adaptive", 5)),
    ({"mode": "standard", "total_max_attempts": 2, "max_attempts": 9},
     RetryPolicy("standard", 2)),
    ({"total_max_attempts": 0}, RetryPolicy("standard", 1)),
])
def test_attempts_and_mode_come_from_botocore_retries(retries: dict[str, object] | None,
                                                      want: RetryPolicy) -> None:
    assert RetryPolicy.from_botocore(retries) == want


def test_back_off_follows_botocores_rules() -> None:
    top = RetryPolicy("standard", 5, random=lambda: 1.0)
    assert top.delay(1, "ThrottlingException") == 1.0  # throttling: base 1 s
    assert top.delay(3, "ProvisionedThroughputExceededException") == 4.0
    assert top.delay(1, "InternalServerError") == 0.025  # DynamoDB's 25 ms otherwise
    assert top.delay(30, "ThrottlingException") == 20.0  # capped
    assert RetryPolicy("legacy", 10, random=lambda: 1.0).delay(2, None) == 0.1
    assert RetryPolicy("standard", 5, random=lambda: 0.0).delay(4, None) == 0.0


def test_one_translator_one_condition_lost() -> None:
    lost = translate("UpdateItem", "ConditionalCheckFailedException", "no",
                     item={"state": {"S": "READY"}})
    assert isinstance(lost, ConditionLost) and lost.item == {"state": {"S": "READY"}}
    gone = translate("GetItem", "ResourceNotFoundException", "no table")
    assert isinstance(gone, StoreError) and "whimbrel tables create" in str(gone)
    assert not gone.retryable
    server = translate("GetItem", None, "HTTP 503", status=503)
    assert isinstance(server, StoreError) and server.retryable
    bad = translate("PutItem", "ValidationException", "too big", status=400)
    assert isinstance(bad, StoreError) and not bad.retryable and bad.aws_code == \
        "ValidationException"


def test_the_transport_setting() -> None:
    assert Settings.from_env({}).transport == "auto"
    assert Settings.from_env({"WHIMBREL_TRANSPORT": " BotoCore "}).transport == "botocore"
    with pytest.raises(InvalidInput, match="WHIMBREL_TRANSPORT must be one of"):
        Settings.from_env({"WHIMBREL_TRANSPORT": "fast"})
