"""The marks written back on a Simple API row always fit the row (issue 31; pure: the
row through the local runtime is in tests/e2e/test_big_rows.py)."""

from __future__ import annotations

from whimbrel.contract.ddbjson import item_size
from whimbrel.contract.limits import MAX_ITEM_BYTES
from whimbrel.contract.marks import MAX_REASON_BYTES, cut_utf8, fit
from whimbrel.contract.records import REMOVE

VERDICT = {"outcome": "REJECTED", "processed_epoch": 1764264000.25,
           "expires_epoch": 1764868800}


def _row(size: int) -> dict[str, dict[str, str]]:
    row = {"workflow_request_id": {"S": "r1"}, "workflow_name": {"S": "wf"}, "input": {"S": ""}}
    row["input"]["S"] = "x" * (size - item_size(row))
    assert item_size(row) == size
    return row


def test_item_size_follows_dynamodbs_rules() -> None:
    assert item_size({"a": {"S": "héllo"}}) == 1 + 6
    assert item_size({"n": {"N": "12345"}}) == 1 + 4  # 5 digits: 3 bytes, +1
    assert item_size({"n": {"N": "-0.00120"}}) == 1 + 2
    assert item_size({"b": {"BOOL": True}, "z": {"NULL": True}}) == 4
    assert item_size({"m": {"M": {"k": {"S": "v"}}}, "l": {"L": [{"S": "ab"}]}}) \
        == (1 + 3 + 1 + 1 + 1) + (1 + 3 + 1 + 2)
    assert item_size({"odd": {"X": 1, "Y": 2}}) > 0  # never raises


def test_the_reason_is_cut_to_its_bound_keeping_whole_characters() -> None:
    marks = fit(VERDICT, "é" * 2000, None, "workflow_request_id")
    assert {k: marks[k] for k in VERDICT} == VERDICT
    text = marks["reason"]
    assert len(text.encode()) <= MAX_REASON_BYTES and text.endswith("…")
    assert cut_utf8("abc", 2) == "" and cut_utf8("abc", 3) == "abc"


def test_a_row_near_the_limit_keeps_its_verdict_and_a_shorter_reason() -> None:
    row = _row(MAX_ITEM_BYTES - 300)
    marks = fit(VERDICT, "r" * 5000, row, "workflow_request_id")
    assert not any(v is REMOVE for v in marks.values())
    after = {**row, **{k: {"S": str(v)} for k, v in marks.items()}}
    assert item_size(after) <= MAX_ITEM_BYTES
    assert 0 < len(marks["reason"]) < 300


def test_a_row_at_the_limit_gives_up_its_largest_attribute_never_its_key() -> None:
    row = _row(MAX_ITEM_BYTES)
    marks = fit(VERDICT, "why", row, "workflow_request_id")
    assert marks["input"] is REMOVE and "workflow_request_id" not in marks
    assert marks["reason"].startswith("removed from this row to make room for this mark")
    assert marks["reason"].endswith("; why") and "input (" in marks["reason"]
    # After DynamoDB refused a mark the estimate allowed: room is freed all the same.
    small = _row(1000)
    assert fit(VERDICT, None, small, "workflow_request_id", no_room=True)["input"] is REMOVE
    only_key = {"workflow_request_id": {"S": "r" * 2048}}
    assert "workflow_request_id" not in fit(VERDICT, None, only_key, "workflow_request_id",
                                            no_room=True)
