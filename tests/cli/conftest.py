"""Fixtures for CLI tests: a Typer runner wired to a fresh table prefix on DynamoDB Local."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import botocore.loaders
import botocore.session
import pynamodb.connection.base
import pytest
from cli_helpers import Run
from typer.testing import CliRunner

from whimbrel import Whimbrel


@pytest.fixture(scope="session", autouse=True)
def shared_botocore_loader() -> Iterator[None]:
    """Every CLI invocation builds fresh PynamoDB connections, each with a new botocore
    session that parses the DynamoDB service model again (~0.3 s each). Share one data
    loader (its parsed-model cache) between those sessions; behaviour is unchanged."""
    loader = botocore.loaders.create_loader()
    original = pynamodb.connection.base.get_session

    def get_session() -> botocore.session.Session:
        session = original()
        session.register_component("data_loader", loader)
        return session

    pynamodb.connection.base.get_session = get_session  # type: ignore[assignment]
    yield
    pynamodb.connection.base.get_session = original  # type: ignore[assignment]


@pytest.fixture
def wb(ddb_endpoint: str, table_prefix: str) -> Iterator[Whimbrel]:
    client = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix)
    client.create_tables()
    yield client
    client.close()


@pytest.fixture
def run(ddb_endpoint: str, table_prefix: str) -> Run:
    return Run(CliRunner(), {"WHIMBREL_ENDPOINT_URL": ddb_endpoint,
                             "WHIMBREL_TABLE_PREFIX": table_prefix, "COLUMNS": "200"})


@pytest.fixture
def write_definition(tmp_path: Path) -> Callable[..., Path]:
    def write(text: str, name: str = "wf.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path
    return write
