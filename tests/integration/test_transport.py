"""The store's transport seam (issue 21, "One transport seam"): the lean client takes its
endpoint, proxies, CA bundle, credentials, User-Agent and retry policy from botocore, and
its fault branches (5xx, throttling, resets, slow replies) retry within bounds, translate
errors and count the back-off in the store's meter. Faults come from a scripted HTTP
server on 127.0.0.1; endpoints are checked without network by reading the resolved URL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from transport_support import (
    FakeDynamo,
    ProxyStub,
    Reply,
    error,
    fake_dynamo,
)

from whimbrel.contract.errors import StoreError
from whimbrel.store import Store
from whimbrel.store.errors import ConditionLost, RetryPolicy
from whimbrel.store.lean import LeanTransport
from whimbrel.store.meter import CapacityMeter
from whimbrel.store.transport import BotocoreTransport, Transport, open_transport

GET = {"TableName": "t", "Key": {"k": {"S": "v"}}}


def session(region: str = "us-east-1") -> boto3.session.Session:
    return boto3.session.Session(aws_access_key_id="AKIDWHIMBREL", aws_secret_access_key="s",
                                 region_name=region)


@pytest.fixture
def fake() -> Iterator[FakeDynamo]:
    with fake_dynamo() as server:
        yield server


class Waits:
    """An injected sleep: records the back-off instead of waiting it."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def lean(fake: FakeDynamo, waits: Waits, *, attempts: int = 4, mode: str = "standard",
         read_timeout: float = 5.0) -> tuple[Transport, CapacityMeter]:
    transport = open_transport(
        endpoint_url=fake.url, boto3_session=session(), kind="lean", sleep=waits,
        botocore_config=Config(retries={"mode": mode, "total_max_attempts": attempts},
                               read_timeout=read_timeout, connect_timeout=2))
    assert isinstance(transport, LeanTransport)
    meter = CapacityMeter()
    transport.observers.append(lambda op, _p, resp: meter.record(op, resp))
    transport.retry_observers.append(meter.record_retry)
    return transport, meter


# -- fault branches --------------------------------------------------------------------------

def test_a_500_is_retried_and_counted(fake: FakeDynamo) -> None:
    waits = Waits()
    transport, meter = lean(fake, waits)
    fake.script = [error(500, "InternalServerError"), Reply(500, {})]
    assert transport.call("GetItem", GET) == {"Item": {"k": {"S": "v"}}}
    assert len(fake.seen) == 3
    assert meter.retries == {"InternalServerError": 1, "HTTP 500": 1}
    assert meter.total_throttles == 0
    # botocore's standard rule for DynamoDB's non-throttling errors: rand * 25 ms * 2^i.
    assert len(waits.delays) == 2 and all(0 <= d <= 0.025 * 2 ** i
                                          for i, d in enumerate(waits.delays))


@pytest.mark.parametrize("code", ["ThrottlingException",
                                  "ProvisionedThroughputExceededException"])
def test_throttling_is_retried_up_to_the_configured_attempts_then_translated(
        fake: FakeDynamo, code: str) -> None:
    waits = Waits()
    transport, meter = lean(fake, waits, attempts=3)
    fake.script = [error(400, code, "slow down")] * 5
    with pytest.raises(StoreError) as info:
        transport.call("UpdateItem", GET)
    assert info.value.aws_code == code and info.value.retryable
    assert "after 3 attempts" in str(info.value) and "slow down" in str(info.value)
    assert len(fake.seen) == 3  # bounded: the config's total_max_attempts
    assert meter.throttles == {"UpdateItem": 2}
    assert meter.retries == {code: 2}
    # The throttling back-off is botocore's: rand * 1 s * 2^i, and it is in the meter.
    assert all(0 <= d <= 2 ** i for i, d in enumerate(waits.delays))
    assert meter.backoff_seconds == pytest.approx(sum(waits.delays))
    assert meter.snapshot()["throttles"] == {"UpdateItem": 2}


def test_a_reset_connection_is_retried(fake: FakeDynamo) -> None:
    waits = Waits()
    transport, meter = lean(fake, waits)
    fake.script = [Reply(action="reset")]
    assert transport.call("GetItem", GET) == {"Item": {"k": {"S": "v"}}}
    assert meter.retries == {"connection": 1}
    assert len(fake.seen) == 2


def test_a_slow_reply_times_out_and_is_retried(fake: FakeDynamo) -> None:
    waits = Waits()
    transport, meter = lean(fake, waits, read_timeout=0.3)
    fake.script = [Reply(action="hold")]
    assert transport.call("GetItem", GET) == {"Item": {"k": {"S": "v"}}}
    assert meter.retries == {"connection": 1}


def test_connection_failures_give_up_after_the_attempts(fake: FakeDynamo) -> None:
    waits = Waits()
    transport, _ = lean(fake, waits, attempts=2)
    fake.script = [Reply(action="reset")] * 3
    with pytest.raises(StoreError, match="after 2 attempts") as info:
        transport.call("GetItem", GET)
    assert info.value.retryable and info.value.aws_code is None


def test_a_lost_condition_is_not_retried_and_carries_the_item(fake: FakeDynamo) -> None:
    transport, meter = lean(fake, Waits())
    fake.script = [error(400, "ConditionalCheckFailedException",
                         Item={"state": {"S": "RUNNING"}})]
    with pytest.raises(ConditionLost) as info:
        transport.call("UpdateItem", GET)
    assert info.value.item == {"state": {"S": "RUNNING"}}
    assert len(fake.seen) == 1 and not meter.retries


@pytest.mark.parametrize(("code", "words"), [
    ("ValidationException", "UpdateItem: ValidationException: scripted"),
    ("ResourceNotFoundException", "run `whimbrel tables create`"),
])
def test_other_client_errors_are_translated_once(fake: FakeDynamo, code: str,
                                                 words: str) -> None:
    transport, _ = lean(fake, Waits())
    fake.script = [error(400, code)]
    with pytest.raises(StoreError, match=words) as info:
        transport.call("UpdateItem", GET)
    assert info.value.aws_code == code and not info.value.retryable
    assert len(fake.seen) == 1


def test_the_botocore_transport_translates_and_counts_the_same(fake: FakeDynamo) -> None:
    transport = open_transport(endpoint_url=fake.url, boto3_session=session(),
                               kind="botocore", botocore_config=Config(
                                   retries={"mode": "standard", "total_max_attempts": 3}))
    assert isinstance(transport, BotocoreTransport)
    meter = CapacityMeter()
    transport.retry_observers.append(meter.record_retry)
    fake.script = [error(400, "ThrottlingException"), error(500, "InternalServerError")]
    assert transport.call("GetItem", GET) == {"Item": {"k": {"S": "v"}}}
    assert meter.throttles == {"GetItem": 1}
    assert meter.retries == {"ThrottlingException": 1, "InternalServerError": 1}
    fake.script = [error(400, "ConditionalCheckFailedException",
                         Item={"state": {"S": "READY"}})]
    with pytest.raises(ConditionLost) as info:
        transport.call("UpdateItem", GET)
    assert info.value.item == {"state": {"S": "READY"}}


def test_the_store_counts_its_back_off_in_its_meter(fake: FakeDynamo) -> None:
    store = Store(endpoint_url=fake.url, boto3_session=session(), transport="lean",
                  botocore_config=Config(retries={"mode": "legacy", "total_max_attempts": 3}))
    fake.script = [error(400, "ProvisionedThroughputExceededException"), Reply(200, {})]
    assert store.get_workflow("w") is None  # the scripted reply has no workflow item
    assert store.meter.throttles == {"GetItem": 1}
    assert 0 < store.meter.backoff_seconds <= 0.05  # legacy mode: rand * 50 ms


# -- what comes from botocore ----------------------------------------------------------------

def test_requests_are_signed_with_the_given_session_and_carry_botocore_user_agent(
        fake: FakeDynamo) -> None:
    transport, _ = lean(fake, Waits())
    transport.call("GetItem", GET)
    headers = fake.seen[0].headers
    assert "Credential=AKIDWHIMBREL/" in headers["Authorization"]
    assert "/us-east-1/dynamodb/aws4_request" in headers["Authorization"]
    assert headers["X-Amz-Target"] == "DynamoDB_20120810.GetItem"
    assert "Botocore/" in headers["User-Agent"] and "whimbrel" in headers["User-Agent"]


def test_the_retry_policy_comes_from_the_config() -> None:
    transport = open_transport(boto3_session=session(), botocore_config=Config(
        retries={"mode": "adaptive", "max_attempts": 6}))
    assert transport.retry == RetryPolicy("adaptive", 7)


def test_endpoint_from_aws_endpoint_url_dynamodb(fake: FakeDynamo,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", fake.url)
    store = Store(boto3_session=session())  # no endpoint_url: botocore resolves it
    assert store.transport.url.rstrip("/") == fake.url
    fake.script = [Reply(200, {})]
    assert store.get_workflow("w") is None
    assert fake.seen and fake.seen[0].target == "DynamoDB_20120810.GetItem"


@pytest.mark.parametrize(("region", "config", "url"), [
    ("cn-north-1", None, "https://dynamodb.cn-north-1.amazonaws.com.cn"),
    ("us-east-1", Config(use_fips_endpoint=True), "https://dynamodb-fips.us-east-1.amazonaws.com"),
    ("us-east-1", Config(use_dualstack_endpoint=True), "https://dynamodb.us-east-1.api.aws"),
])
@pytest.mark.parametrize("kind", ["lean", "botocore"])
def test_partition_fips_and_dual_stack_endpoints_come_from_botocore(
        region: str, config: Config | None, url: str, kind: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    store = Store(boto3_session=session(region), botocore_config=config, transport=kind)
    assert store.transport.url.rstrip("/") == url
    assert store.region == region


def test_https_proxy_from_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = ProxyStub()
    try:
        for name in ("NO_PROXY", "no_proxy", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        store = Store(boto3_session=session("eu-west-1"), transport="lean",
                      botocore_config=Config(retries={"total_max_attempts": 1},
                                             connect_timeout=2, read_timeout=2))
        with pytest.raises(StoreError):
            store.get_workflow("w")  # the stub refuses the tunnel
        assert [line.rsplit(" ", 1)[0] for line in proxy.lines] == [
            "CONNECT dynamodb.eu-west-1.amazonaws.com:443"]
    finally:
        proxy.close()


def test_the_ca_bundle_comes_from_aws_ca_bundle(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("")
    monkeypatch.setenv("AWS_CA_BUNDLE", str(bundle))
    transport = open_transport(boto3_session=session(), kind="lean")
    assert isinstance(transport, LeanTransport)
    # The lean client sends on botocore's own HTTP session, verified against the bundle.
    assert transport.resolved.http_session._verify == str(bundle)


def test_a_client_the_lean_path_cannot_honour_falls_back_to_botocore() -> None:
    from botocore import UNSIGNED

    config = Config(signature_version=UNSIGNED)
    assert open_transport(boto3_session=session(), botocore_config=config).name == "botocore"
    with pytest.raises(ValueError, match="cannot honour"):
        open_transport(boto3_session=session(), botocore_config=config, kind="lean")


def test_whimbrel_takes_a_users_session_and_config(fake: FakeDynamo) -> None:
    from whimbrel import Whimbrel

    wb = Whimbrel(endpoint_url=fake.url, boto3_session=session("ap-southeast-2"),
                  botocore_config=Config(user_agent_extra="myapp/1.0",
                                         retries={"total_max_attempts": 1}))
    try:
        fake.script = [Reply(200, {})]
        assert wb.store.get_workflow("w") is None
        headers = fake.seen[0].headers
        assert "myapp/1.0" in headers["User-Agent"]
        assert "Credential=AKIDWHIMBREL/" in headers["Authorization"]
        assert "/ap-southeast-2/dynamodb/" in headers["Authorization"]
        assert wb.store.transport.retry.max_attempts == 1
        fake.script = [error(500, "InternalServerError")]
        with pytest.raises(StoreError, match="after 1 attempts"):
            wb.store.get_workflow("w")  # the user's attempts, not Whimbrel's default
    finally:
        wb.close()


def test_credentials_are_looked_up_until_found(fake: FakeDynamo, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    transport = open_transport(endpoint_url=fake.url, kind="lean",
                               boto3_session=boto3.session.Session(region_name="us-east-1"))
    with pytest.raises(StoreError, match="Unable to locate credentials") as info:
        transport.call("GetItem", GET)
    assert not info.value.retryable and not fake.seen
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDLATER")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    assert transport.call("GetItem", GET) == {"Item": {"k": {"S": "v"}}}
    assert "Credential=AKIDLATER/" in fake.seen[0].headers["Authorization"]
