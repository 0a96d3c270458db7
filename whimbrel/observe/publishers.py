"""Where events go: EventBridge on AWS, a JSON-lines file locally, a list in tests.

A publisher raises :class:`PublishError` (retryable) when an event may not have been
delivered; the notify consumer then leaves its marker PENDING and the stream record is
retried (docs/events.md, "Exactly once").
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from whimbrel.contract.errors import WhimbrelError
from whimbrel.contract.notifications import EVENT_SOURCE, LOCAL_ACCOUNT, Notification
from whimbrel.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_events.client import EventBridgeClient

__all__ = ["DEFAULT_BUS", "EventBridgePublisher", "JsonLinesPublisher", "MemoryPublisher",
           "PublishError", "Publisher", "publisher_from_settings", "read_events"]

#: The account's default event bus.
DEFAULT_BUS = "default"
#: Entries per PutEvents call (the API's limit).
PUT_EVENTS_BATCH = 10


class PublishError(WhimbrelError):
    """An event may not have reached its destination; retrying may succeed."""

    retryable = True


class Publisher(Protocol):
    """Sends events. Returns once every one was accepted; raises otherwise."""

    def publish(self, notifications: Sequence[Notification]) -> None: ...


class EventBridgePublisher:
    """``PutEvents`` on an EventBridge bus (name or ARN; the default bus unless told).

    Args:
        client: a boto3 ``events`` client (one is made for ``region`` when None).
        bus: the bus's name or ARN.
        region: for the client it makes.
    """

    def __init__(self, client: EventBridgeClient | None = None, *, bus: str = DEFAULT_BUS,
                 region: str | None = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("events", region_name=region)
        self.client = client
        self.bus = bus

    def publish(self, notifications: Sequence[Notification]) -> None:
        """Raises:
        PublishError: the call failed, or EventBridge refused an entry.
        """
        items = list(notifications)
        for start in range(0, len(items), PUT_EVENTS_BATCH):
            chunk = items[start:start + PUT_EVENTS_BATCH]
            entries: list[Any] = [{
                "Source": EVENT_SOURCE,
                "DetailType": n.detail_type.value,
                "Detail": n.detail_json(),
                "Time": datetime.fromtimestamp(n.time, UTC),
                "Resources": list(n.resources),
                "EventBusName": self.bus,
            } for n in chunk]
            try:
                resp = self.client.put_events(Entries=entries)
            except (ClientError, BotoCoreError) as exc:
                raise PublishError(f"PutEvents on bus {self.bus!r} failed: {exc}",
                                   bus=self.bus) from exc
            if resp.get("FailedEntryCount"):
                failed = [f"{n.event_id}: {e.get('ErrorCode')} {e.get('ErrorMessage')}"
                          for n, e in zip(chunk, resp.get("Entries", []), strict=False)
                          if e.get("ErrorCode")]
                raise PublishError(f"EventBridge refused {resp['FailedEntryCount']} event(s) "
                                   f"on bus {self.bus!r}: {'; '.join(failed)}", bus=self.bus)


class JsonLinesPublisher:
    """Appends each event to ``path`` as one JSON line, in the envelope EventBridge
    delivers (``whimbrel dev --events-file``); ``whimbrel notifications`` reads it."""

    def __init__(self, path: str | Path, *, region: str = "us-east-1",
                 account: str = LOCAL_ACCOUNT) -> None:
        self.path = Path(path)
        self.region = region
        self.account = account
        self._lock = threading.Lock()

    def publish(self, notifications: Sequence[Notification]) -> None:
        """Raises:
        PublishError: the file cannot be written.
        """
        text = "".join(json.dumps(n.envelope(account=self.account, region=self.region),
                                  sort_keys=True) + "\n" for n in notifications)
        try:
            # One write per batch, in append mode: lines from several writers never mix.
            with self._lock, self.path.open("a", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise PublishError(f"cannot append to the events file {str(self.path)!r}: "
                               f"{exc.strerror or exc}", path=str(self.path)) from exc


class MemoryPublisher:
    """Keeps what it is given, in order (for tests of code that publishes)."""

    def __init__(self) -> None:
        self.published: list[Notification] = []
        self._lock = threading.Lock()

    def publish(self, notifications: Sequence[Notification]) -> None:
        with self._lock:
            self.published.extend(notifications)

    def event_ids(self) -> list[str]:
        with self._lock:
            return [n.event_id for n in self.published]


def publisher_from_settings(settings: Settings) -> Publisher:
    """The events file when ``WHIMBREL_EVENTS_FILE`` is set, else EventBridge on
    ``WHIMBREL_EVENT_BUS`` (the default bus)."""
    if settings.events_file:
        return JsonLinesPublisher(settings.events_file, region=settings.region or "us-east-1")
    return EventBridgePublisher(bus=settings.event_bus or DEFAULT_BUS, region=settings.region)


def read_events(path: str | Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """The events appended to ``path`` after byte ``offset``, and the offset after the
    last whole line (a line still being written is left for the next call).

    Raises:
        OSError: the file cannot be read.
        ValueError: a whole line is not a JSON object.
    """
    with Path(path).open("rb") as fh:
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n") + 1
    events: list[dict[str, Any]] = []
    for number, line in enumerate(_lines(data[:end]), start=1):
        value = json.loads(line)
        if not isinstance(value, dict):
            raise ValueError(f"line {number} after byte {offset} is not a JSON object")
        events.append(value)
    return events, offset + end


def _lines(data: bytes) -> Iterator[str]:
    for raw in data.splitlines():
        if raw.strip():
            yield raw.decode("utf-8")
