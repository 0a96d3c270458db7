"""Shared fixtures: one DynamoDB Local per pytest session (per xdist worker).

Set ``WHIMBREL_TEST_ENDPOINT_URL`` to run against a server you started yourself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from whimbrel.testing import dynamodb_local, fresh_table_prefix

# Dummy credentials so boto3 never looks for real ones; DynamoDB Local (started with
# -sharedDb) and moto accept anything. moto needs the account-id endpoint mode off
# or its stream calls miss its endpoint.
for _name, _value in {
    "AWS_ACCESS_KEY_ID": "whimbrel",
    "AWS_SECRET_ACCESS_KEY": "whimbrel",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
}.items():
    os.environ.setdefault(_name, _value)


@pytest.fixture(scope="session")
def ddb_endpoint() -> Iterator[str]:
    """Endpoint URL of a DynamoDB Local shared by this session's tests."""
    external = os.environ.get("WHIMBREL_TEST_ENDPOINT_URL")
    if external:
        yield external
        return
    with dynamodb_local() as server:
        yield server.endpoint_url


@pytest.fixture
def table_prefix() -> str:
    """A table-name prefix unique to this test, so tests never share tables."""
    return fresh_table_prefix()
