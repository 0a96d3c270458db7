"""Shared fixtures: one DynamoDB Local per pytest session (per xdist worker).

The server starts when the first test asks for it. A start that fails (slow machine,
JVM crash) fails that test only: the session object never raises, the per-test
``ddb_endpoint`` does, and the next test tries again (a bounded number of times; see
:class:`whimbrel.testing.SharedDynamoDBLocal`).

Set ``WHIMBREL_TEST_ENDPOINT_URL`` to run against a server you started yourself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import boto3
import pytest

from whimbrel.local.s3 import LocalS3
from whimbrel.testing import SharedDynamoDBLocal, fresh_table_prefix

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
def dynamodb_server() -> Iterator[SharedDynamoDBLocal]:
    """The session's DynamoDB Local, not yet started (it never fails here)."""
    with SharedDynamoDBLocal(os.environ.get("WHIMBREL_TEST_ENDPOINT_URL")) as shared:
        yield shared


@pytest.fixture
def ddb_endpoint(dynamodb_server: SharedDynamoDBLocal) -> str:
    """Endpoint URL of the DynamoDB Local shared by this session's tests (started on
    first use; a failed start fails this test only)."""
    return dynamodb_server.endpoint_url()


@pytest.fixture(scope="module")
def module_ddb_endpoint(dynamodb_server: SharedDynamoDBLocal) -> str:
    """``ddb_endpoint`` for module-scoped fixtures (a failed start fails that module)."""
    return dynamodb_server.endpoint_url()


def _table_names(endpoint_url: str) -> set[str]:
    client = boto3.client("dynamodb", endpoint_url=endpoint_url)
    names: set[str] = set()
    params: dict[str, str] = {}
    while True:
        page = client.list_tables(**params)
        names.update(page.get("TableNames", []))
        if not page.get("LastEvaluatedTableName"):
            return names
        params = {"ExclusiveStartTableName": page["LastEvaluatedTableName"]}


@pytest.fixture(scope="module", autouse=True)
def _drop_the_modules_tables(dynamodb_server: SharedDynamoDBLocal) -> Iterator[None]:
    """After each test file, delete the tables it left on the session's server.

    DynamoDB Local slows down as tables pile up (a session made about 1,300, most by
    fixtures that never deleted theirs); a file's tables are dropped when it ends, so
    module-scoped fixtures keep theirs for the whole file. Never starts the server, and
    leaves an external one (``WHIMBREL_TEST_ENDPOINT_URL``, perhaps shared) alone.
    """
    url = dynamodb_server.started_endpoint()
    before = _table_names(url) if url else set()
    yield
    url = dynamodb_server.started_endpoint()
    if url is None:
        return
    client = boto3.client("dynamodb", endpoint_url=url)
    for name in sorted(_table_names(url) - before):
        try:
            client.delete_table(TableName=name)
        except client.exceptions.ResourceNotFoundException:
            pass  # a fixture deleted it as this ran


@pytest.fixture
def table_prefix() -> str:
    """A table-name prefix unique to this test, so tests never share tables."""
    return fresh_table_prefix()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files holding ``slow`` tests first (each file in its own order): ``./scripts/test``
    hands whole files to three workers (``--dist loadfile --no-loadscope-reorder``), so a
    long file started last would leave one worker running alone at the end."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # stable: keeps each file's order


@pytest.fixture(scope="session")
def local_s3() -> Iterator[LocalS3]:
    """moto's S3 server, one per session (the payload bucket's stand-in)."""
    with LocalS3() as server:
        yield server


@pytest.fixture
def payload_bucket(local_s3: LocalS3, monkeypatch: pytest.MonkeyPatch,
                   table_prefix: str) -> str:
    """A fresh bucket on the local S3, with ``AWS_ENDPOINT_URL_S3`` pointing at it."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", local_s3.url)
    return local_s3.create_bucket(table_prefix.strip("_").lower().replace("_", "-")[:40]
                                  + "-payloads")
