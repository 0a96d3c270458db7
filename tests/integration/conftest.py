from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from whimbrel import Whimbrel


class ManualClock:
    """Real time plus an offset the test can move forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def wb(ddb_endpoint: str, table_prefix: str, clock: ManualClock) -> Iterator[Whimbrel]:
    client = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix, clock=clock)
    client.create_tables()
    yield client
    client.close()
    client.store.delete_tables()  # keep the shared server small and fast
