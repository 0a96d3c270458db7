"""Bad input corpus for the notify Lambda: hostile ``workflow_exec`` and ``activity_exec``
stream records (items only Whimbrel writes — but a Full Logic client may write them too,
and a bug may) fed to the real handler, each between two good records, on DynamoDB Local.

Each bad record must be rejected (a rejection row, source ``notify``, naming the problem)
or ignored; never retried (no batch item failure) and never blocking the good records
around it, which publish their events; nothing else stored may change. The whole corpus
delivered again publishes nothing new and adds no rejection.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from stream_records import DROP, Case, N, S, Stream, image, nested_m, replay, run_corpus

from lambdas import notify
from whimbrel import ActivityDefinition, RetryPolicy, Whimbrel, WorkflowDefinition
from whimbrel.observe import MemoryPublisher
from whimbrel.testing import StepClock


@pytest.fixture(autouse=True)
def _no_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> MemoryPublisher:
    """The handler's per-container publisher (the corpus' contexts carry none)."""
    publisher = MemoryPublisher()
    monkeypatch.setattr(notify, "_publisher", publisher)
    return publisher


@pytest.fixture
def nwb(ddb_endpoint: str, table_prefix: str) -> Iterator[Whimbrel]:
    rwb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                   clock=StepClock(time.time()))
    rwb.create_tables()
    rwb.register_workflow(WorkflowDefinition("ok", (
        ActivityDefinition("A", retry=RetryPolicy(max_attempts=2)),)))
    yield rwb
    rwb.close()


def attempt(**over: Any) -> dict[str, Any]:
    wx = f"wx-{uuid.uuid4()}"
    return image({"workflow_exec_id": S(wx), "activity_exec_id": S(f"{wx}:A:2"),
                  "activity_name": S("A"), "workflow_name": S("ok"),
                  "workflow_version": N("1"), "attempt": N("2"), "state": S("FAILED")}, over)


def run(**over: Any) -> dict[str, Any]:
    return image({"workflow_exec_id": S(f"wx-{uuid.uuid4()}"), "workflow_name": S("ok"),
                  "version": N("1"), "state": S("CANCELLED"), "created_epoch": N("1")}, over)


CASES: list[Case] = [
    # Activities that fail for good, made unreadable.
    Case("unknown activity state", attempt(state=S("EXPLODED")), "does not decode",
         event_name="MODIFY"),
    Case("attempt as text", attempt(attempt=S("two")), "does not decode", event_name="MODIFY"),
    Case("attempt beyond DynamoDB's range", attempt(attempt=N("1e400")), "does not decode",
         event_name="MODIFY"),
    Case("unregistered workflow", attempt(workflow_name=S("nope")),
         "no registered workflow definition 'nope'", event_name="MODIFY"),
    Case("unregistered version", attempt(workflow_version=N("9")), "'ok' version 9",
         event_name="MODIFY"),
    Case("activity not in the definition", attempt(activity_name=S("Z"),
                                                   activity_exec_id=S("wx:Z:2")),
         "workflow 'ok' has no activity 'Z'", event_name="MODIFY"),
    Case("history as a number", attempt(history=N("3")), "does not decode",
         event_name="MODIFY"),
    Case("type tag unknown", attempt(error={"Z": "x"}), "does not decode",
         event_name="MODIFY"),
    Case("error map nested 10,000 deep", attempt(error=nested_m(10_000)), "does not decode",
         event_name="MODIFY"),
    # Runs that ended, made unreadable.
    Case("unknown workflow state", run(state=S("GONE")), "does not decode",
         event_name="MODIFY"),
    Case("run without a state", run(state=DROP), "does not decode", event_name="MODIFY"),
    Case("completed run of an unregistered workflow",
         run(state=S("COMPLETED"), workflow_name=S("nope")),
         "no registered workflow definition 'nope'", event_name="MODIFY"),
    Case("NewImage is a list", [S("x")], "stream record has no dynamodb.NewImage",
         event_name="MODIFY"),
    Case("dynamodb part is text", None, "stream record has no dynamodb.NewImage",
         event_name="MODIFY", dynamodb="garbage"),
    # No event: ignored, not rejected.
    Case("a retry follows (attempt 1 of 2)", attempt(attempt=N("1")), None,
         event_name="MODIFY"),
    Case("a run still going", run(state=S("RUNNING")), None, event_name="MODIFY"),
    Case("a TTL delete of an ended run", run(), None, event_name="REMOVE"),
    Case("waiting_for that is no text", attempt(state=S("READY"), waiting_for=N("1")), None,
         event_name="MODIFY"),
    Case("empty waiting_for", attempt(state=S("READY"), waiting_for=S("")), None,
         event_name="MODIFY"),
]


def test_bad_notify_records(nwb: Whimbrel, published: MemoryPublisher) -> None:
    wb = nwb
    stream = Stream(f"{wb.table_prefix}workflow_exec", "workflow_exec_id")

    def good() -> tuple[dict[str, Any], str]:
        rec = stream.record(run(), event_name="MODIFY")
        return rec, rec["dynamodb"]["NewImage"]["workflow_exec_id"]["S"]

    def announced(wx: str) -> bool:
        marker = wb.store.markers.get_notification(f"{wx}/ended/0")
        return marker is not None and marker["status"] == "SENT" and \
            f"{wx}/ended/0" in published.event_ids()

    wrong, bad = run_corpus(wb, notify.handler, stream, "notify", CASES, good, announced)
    assert wrong == [], "\n".join(wrong)
    goods = len(published.event_ids())
    assert goods == 2 * len(CASES)  # only the good records made events
    replay(wb, notify.handler, "notify", bad, good, announced)
    assert len(published.event_ids()) == goods + len(bad)  # the replay's good ones only
    print(f"\nbad notify records tried: {len(CASES)}")
