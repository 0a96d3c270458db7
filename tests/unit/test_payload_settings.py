"""Issue 27: the payload bucket's settings, limits and S3 client (no I/O: building a
client sends nothing)."""

from __future__ import annotations

import pytest
from botocore.config import Config

from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.limits import MAX_INPUT_BYTES, MAX_OUTPUT_BYTES
from whimbrel.contract.payloads import NO_BUCKET, PayloadLimits, is_ref, parse_ref
from whimbrel.settings import Settings
from whimbrel.store.store import Store


def test_settings_read_the_payload_variables() -> None:
    s = Settings.from_env({"WHIMBREL_PAYLOAD_BUCKET": "my-bucket",
                           "WHIMBREL_PAYLOAD_PREFIX": "wb/",
                           "WHIMBREL_PAYLOAD_THRESHOLD_BYTES": "4096",
                           "WHIMBREL_PAYLOAD_MAX_BYTES": "60000000"})
    assert (s.payload_bucket, s.payload_prefix) == ("my-bucket", "wb/")
    assert (s.payload_threshold_bytes, s.payload_max_bytes) == (4096, 60_000_000)
    default = Settings.from_env({})
    assert (default.payload_bucket, default.payload_prefix) == (None, "whimbrel/")


@pytest.mark.parametrize("raw", ["0", "-1", "1e6", "lots"])
def test_a_bad_byte_count_is_refused_by_name(raw: str) -> None:
    with pytest.raises(InvalidInput, match="WHIMBREL_PAYLOAD_MAX_BYTES"):
        Settings.from_env({"WHIMBREL_PAYLOAD_MAX_BYTES": raw})


def test_limits_without_and_with_a_bucket() -> None:
    assert (NO_BUCKET.input_bytes, NO_BUCKET.output_bytes) == (MAX_INPUT_BYTES,
                                                              MAX_OUTPUT_BYTES)
    with pytest.raises(InvalidInput, match=r"payload_bucket \(WHIMBREL_PAYLOAD_BUCKET\)"):
        NO_BUCKET.encode("x" * MAX_OUTPUT_BYTES, "output")
    big = PayloadLimits(bucket="b", max_bytes=60_000_000)
    assert big.encode("x" * 50_000_000, "output") is not None
    with pytest.raises(InvalidInput, match="WHIMBREL_PAYLOAD_MAX_BYTES"):
        big.encode("x" * 60_000_000, "output")


def test_references_are_never_json() -> None:
    assert is_ref("s3://b/k") and not is_ref('"s3://b/k"') and not is_ref(None)
    assert parse_ref("s3://b/a/k.json") == ("b", "a/k.json")
    for bad in ("s3://b", "s3:///k", "http://b/k"):
        with pytest.raises(InvalidInput, match="s3://bucket/key"):
            parse_ref(bad)


def test_the_s3_client_shares_the_dynamodb_clients_session_and_config(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
    config = Config(proxies={"https": "http://proxy.example:3128"},
                    retries={"total_max_attempts": 7, "mode": "standard"})
    store = Store(endpoint_url="http://127.0.0.1:8", region="eu-west-1",
                  botocore_config=config, payload_bucket="my-bucket")
    s3 = store.blobs.client
    assert s3.meta.region_name == "eu-west-1"
    assert s3.meta.config.proxies == {"https": "http://proxy.example:3128"}
    assert s3.meta.config.retries["total_max_attempts"] == 7
    assert s3.meta.config.user_agent_extra == store.botocore.meta.config.user_agent_extra
    # Its own endpoint (AWS_ENDPOINT_URL_S3), never the DynamoDB one.
    assert s3.meta.endpoint_url == "http://127.0.0.1:9"
    assert store.payload_limits.bucket == "my-bucket"


def test_a_bad_bucket_name_is_refused() -> None:
    with pytest.raises(InvalidInput, match="payload_bucket"):
        Store(endpoint_url="http://127.0.0.1:8", payload_bucket="Not A Bucket")


def test_from_env_gives_the_client_its_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    from whimbrel import Whimbrel

    monkeypatch.setenv("WHIMBREL_ENDPOINT_URL", "http://127.0.0.1:8")
    monkeypatch.setenv("WHIMBREL_PAYLOAD_BUCKET", "env-bucket")
    monkeypatch.setenv("WHIMBREL_PAYLOAD_PREFIX", "p/")
    monkeypatch.setenv("WHIMBREL_PAYLOAD_MAX_BYTES", "70000000")
    wb = Whimbrel.from_env()
    try:
        blobs = wb.store.blobs
        assert (blobs.bucket, blobs.prefix, blobs.limits.max_bytes) == (
            "env-bucket", "p/", 70_000_000)
    finally:
        wb.close()
    plain = Whimbrel(endpoint_url="http://127.0.0.1:8")
    try:
        assert plain.store.blobs.bucket is None  # the argument's default: no bucket
        assert plain.store.payload_limits.output_bytes == MAX_OUTPUT_BYTES
    finally:
        plain.close()
