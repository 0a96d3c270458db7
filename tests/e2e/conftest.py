"""End-to-end fixtures: the whole serverless path through :class:`LocalRuntime`."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from e2e_support import RawClient

from whimbrel.local.runtime import LocalRuntime

# EMF metric lines on stdout are for CloudWatch; here they only bury test output.
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")


@pytest.fixture
def runtime(ddb_endpoint: str, table_prefix: str) -> Iterator[LocalRuntime]:
    with LocalRuntime(ddb_endpoint, table_prefix, heartbeat_rate_seconds=0.2,
                      lambda_log_level="WARNING") as rt:
        yield rt
        rt.client.store.delete_tables()  # the session's DynamoDB Local is shared


@pytest.fixture
def raw(ddb_endpoint: str, table_prefix: str) -> RawClient:
    return RawClient(ddb_endpoint, table_prefix)
