"""Fixtures of the reliability tier: a client on a clock that only the test moves,
with a recording launcher for the ``lambda`` kind, so every launch is counted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from whimbrel import Whimbrel
from whimbrel.testing import RecordingLauncher, StepClock


@pytest.fixture
def step_clock() -> StepClock:
    return StepClock()


@pytest.fixture
def launcher() -> RecordingLauncher:
    return RecordingLauncher()


@pytest.fixture
def rwb(ddb_endpoint: str, table_prefix: str, step_clock: StepClock,
        launcher: RecordingLauncher) -> Iterator[Whimbrel]:
    client = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix, clock=step_clock,
                      launchers={"lambda": launcher})
    client.create_tables()
    yield client
    client.close()
