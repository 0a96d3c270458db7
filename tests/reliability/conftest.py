"""Fixtures of the reliability tier: a client on a clock that only the test moves,
with a recording launcher for the ``lambda`` kind, so every launch is counted.

``rwb`` runs each test twice: on the in-memory twin (``memory``, marked ``twin``: the
unit tier, ``pytest -m twin``, no Java) and on DynamoDB Local (``dynamodb_local``), so
the twin never replaces the real thing in the suite."""

from __future__ import annotations

import os
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

#: Crash plans that also run on DynamoDB Local (every plan runs on the twin, whose
#: semantics the store contract tests and the Hypothesis comparison check against it):
#: one of each family — a DAG, a retry, a cancel, a map, a child, a wait, a pool.
#: ``WHIMBREL_CRASH_LOCAL=all`` runs every plan on both (about 3 min more here).
LOCAL_CRASH_PLANS = frozenset({"diamond", "retry", "cancel", "map-handler", "child",
                               "signal", "pool"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("WHIMBREL_CRASH_LOCAL") == "all":
        return
    kept, dropped = [], []
    for item in items:
        name = item.name
        local_plan = name.startswith("test_crash_at_every_write[dynamodb_local-")
        plan = name.removeprefix("test_crash_at_every_write[dynamodb_local-")[:-1]
        (dropped if local_plan and plan not in LOCAL_CRASH_PLANS else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


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
