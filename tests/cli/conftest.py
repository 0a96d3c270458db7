"""Fixtures for CLI tests: a Typer runner wired to a fresh table prefix on DynamoDB Local."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cli_helpers import Run
from typer.testing import CliRunner

from whimbrel import Whimbrel


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
