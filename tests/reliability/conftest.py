"""Fixtures of the reliability tier: a client on a clock that only the test moves,
with a recording launcher for the ``lambda`` kind, so every launch is counted.

``rwb`` runs each test twice: on the in-memory twin (``memory``, marked ``twin``: the
unit tier, ``pytest -m twin``, no Java) and on DynamoDB Local (``dynamodb_local``), so
the twin never replaces the real thing in the suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from reliability_driver import local_client

from whimbrel import Whimbrel
from whimbrel.testing import RecordingLauncher, StepClock


@pytest.fixture
def step_clock() -> StepClock:
    return StepClock()


@pytest.fixture
def launcher() -> RecordingLauncher:
    return RecordingLauncher()


STORES = [pytest.param("memory", marks=pytest.mark.twin), "dynamodb_local"]


@pytest.fixture(params=STORES)
def rwb(request: pytest.FixtureRequest, table_prefix: str, step_clock: StepClock,
        launcher: RecordingLauncher) -> Iterator[Whimbrel]:
    if request.param == "memory":
        client = Whimbrel.in_memory(clock=step_clock, table_prefix=table_prefix,
                                    launchers={"lambda": launcher})
    else:
        client = local_client(request.getfixturevalue("ddb_endpoint"), table_prefix,
                              step_clock, launcher)
    yield client
    client.close()
