from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from whimbrel import Whimbrel
from whimbrel.local.s3 import LocalS3
from whimbrel.testing import RecordingLauncher, StepClock


class ManualClock:
    """Real time plus an offset the test can move forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture
def clock(request: pytest.FixtureRequest) -> ManualClock | StepClock:
    """Real time plus an offset; a module that sets ``CLOCK = StepClock`` gets a clock
    that stands still until the test moves it (deadlines driven through ``sweep``)."""
    factory: type[ManualClock] | type[StepClock] = getattr(request.module, "CLOCK",
                                                           ManualClock)
    return factory()


@pytest.fixture
def launched() -> RecordingLauncher:
    """The ``lambda`` launcher of ``wb``: records launches and starts nothing."""
    return RecordingLauncher()


@pytest.fixture
def wb(ddb_endpoint: str, table_prefix: str, clock: ManualClock | StepClock,
       launched: RecordingLauncher) -> Iterator[Whimbrel]:
    client = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix, clock=clock,
                      launchers={"lambda": launched})
    client.create_tables()
    yield client
    client.close()
    client.store.delete_tables()  # keep the shared server small and fast


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
