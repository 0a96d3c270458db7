"""How the Lambdas handle one stream batch (``lambdas._shared.process_batch``): records
of different activities at the same time, one activity's in order, and partial batch
failures that never report a record done after a failure in its group."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # lambdas/ sits next to whimbrel/ in the checkout
    sys.path.append(str(ROOT))

from lambdas._shared import order_key, process_batch  # noqa: E402


@pytest.fixture(autouse=True)
def _no_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")


def rec(seq: int, activity: str | None = None, run: str | None = None) -> dict[str, Any]:
    image = {"activity_event_id": {"S": f"ev{seq}"}}
    if activity:
        image["activity_exec_id"] = {"S": activity}
    if run:
        image["workflow_exec_id"] = {"S": run}
    return {"eventID": f"e{seq}", "eventName": "INSERT",
            "dynamodb": {"Keys": {"activity_event_id": {"S": f"ev{seq}"}}, "NewImage": image,
                         "SequenceNumber": str(100 + seq)}}


def seqs(response: dict[str, Any]) -> list[int]:
    return [int(f["itemIdentifier"]) - 100 for f in response["batchItemFailures"]]


def test_the_order_key_is_the_activity_else_the_run_else_the_item() -> None:
    assert order_key(rec(1, "a:x:1", "r")) == "activity_exec_id a:x:1"
    assert order_key(rec(2, None, "r")) == "workflow_exec_id r"
    request = {"dynamodb": {"Keys": {"workflow_request_id": {"S": "q"}},
                            "NewImage": {"workflow_request_id": {"S": "q"}}}}
    assert order_key(request).startswith("workflow_exec_id ")  # the request's run
    assert order_key(rec(3)) == '{"activity_event_id": {"S": "ev3"}}'


def test_groups_run_at_the_same_time_and_each_group_in_order() -> None:
    # Two activities, two records each. Each first record waits until the other
    # activity's first record has started: only concurrent groups get past it.
    started = {"A": threading.Event(), "B": threading.Event()}
    order: list[int] = []
    lock = threading.Lock()

    def handle(record: dict[str, Any]) -> None:
        act = record["dynamodb"]["NewImage"]["activity_exec_id"]["S"]
        seq = int(record["dynamodb"]["SequenceNumber"]) - 100
        if seq in (0, 1):
            started[act].set()
            assert started["B" if act == "A" else "A"].wait(10), "groups ran one by one"
        with lock:
            order.append(seq)

    batch = [rec(0, "A"), rec(1, "B"), rec(2, "A"), rec(3, "B")]
    assert seqs(process_batch({"Records": batch}, None, handle)) == []
    assert sorted(order) == [0, 1, 2, 3]
    assert order.index(0) < order.index(2) and order.index(1) < order.index(3)


def test_a_failure_stops_its_group_and_reports_what_was_not_done() -> None:
    handled: list[int] = []
    lock = threading.Lock()

    def handle(record: dict[str, Any]) -> None:
        seq = int(record["dynamodb"]["SequenceNumber"]) - 100
        if seq == 2:
            raise RuntimeError("throttled")
        with lock:
            handled.append(seq)

    # A: 0, 2 (fails), 4, 5; B: 1, 3; C: 6.
    batch = [rec(0, "A"), rec(1, "B"), rec(2, "A"), rec(3, "B"), rec(4, "A"), rec(5, "A"),
             rec(6, "C")]
    response = process_batch({"Records": batch}, None, handle)
    # The failed record and the records after it in its group are reported (never
    # handled: they must not overtake it); the other groups are done.
    assert seqs(response) == [2, 4, 5]
    assert sorted(handled) == [0, 1, 3, 6]


def test_a_batch_of_one_group_runs_in_order_and_stops_at_its_failure() -> None:
    handled: list[int] = []

    def handle(record: dict[str, Any]) -> None:
        seq = int(record["dynamodb"]["SequenceNumber"]) - 100
        if seq == 1:
            raise ValueError("bad")
        handled.append(seq)

    response = process_batch({"Records": [rec(0, "A"), rec(1, "A"), rec(2, "A")]}, None,
                             handle)
    assert seqs(response) == [1, 2] and handled == [0]
    assert process_batch({"Records": []}, None, handle) == {"batchItemFailures": []}
