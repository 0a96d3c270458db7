"""Helpers of the Lambda bad-input corpus (imported as a plain module: tests/ has no
packages): DynamoDB-stream records shaped like Lambda's, the batch runner that puts good
records around each bad one, and a snapshot of every stored item."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract.errors import WhimbrelError
from whimbrel.local.runtime import LambdaContext
from whimbrel.store import specs

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # lambdas/ sits next to whimbrel/ in the checkout
    sys.path.append(str(ROOT))

#: Every record is created 2025-01-01T00:00:00Z, so its rejection row is on that day.
CREATED = 1735689600
DAY = "2025-01-01"
#: Marks an attribute to leave out of an image.
DROP = object()


def S(value: str) -> dict[str, Any]:
    return {"S": value}


def N(value: str) -> dict[str, Any]:
    return {"N": value}


def nested_m(depth: int) -> dict[str, Any]:
    """A native DynamoDB map nested ``depth`` levels."""
    value: dict[str, Any] = S("x")
    for _ in range(depth):
        value = {"M": {"k": value}}
    return value


def nested_json(depth: int) -> str:
    return "[" * depth + "]" * depth


def image(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if value is DROP:
            out.pop(key, None)
        else:
            out[key] = value
    return out


@dataclass
class Case:
    """One hostile record: its label, its NewImage (or a whole record), and the words its
    rejection must contain (None: the handler must ignore it, no rejection, no effect)."""

    label: str
    new_image: Any
    words: str | None
    event_name: str = "INSERT"
    #: Replace the record's whole ``dynamodb`` part with this (not even a mapping).
    dynamodb: Any = None


@dataclass
class Stream:
    """Builds Lambda-shaped records of one table's stream with increasing sequence numbers."""

    table: str
    key: str
    seq: int = 1_000
    arn: str = field(init=False)

    def __post_init__(self) -> None:
        self.arn = (f"arn:aws:dynamodb:us-east-1:123456789012:table/{self.table}/stream/"
                    "2025-01-01T00:00:00.000")

    def record(self, new_image: Any, *, event_name: str = "INSERT",
               dynamodb: Any = None) -> dict[str, Any]:
        self.seq += 1
        raw_ddb: dict[str, Any] = {"ApproximateCreationDateTime": CREATED,
                                   "SequenceNumber": str(self.seq), "SizeBytes": 100,
                                   "StreamViewType": "NEW_IMAGE"}
        if isinstance(new_image, dict) and isinstance(new_image.get(self.key), dict):
            raw_ddb["Keys"] = {self.key: new_image[self.key]}
        if event_name == "REMOVE":
            raw_ddb["OldImage"] = new_image
            raw_ddb["StreamViewType"] = "OLD_IMAGE"
        elif new_image is not None:
            raw_ddb["NewImage"] = new_image
        raw = {"eventID": f"ev{self.seq:08d}", "eventName": event_name, "dynamodb": raw_ddb}
        rec = self.lambda_shape(raw)
        if dynamodb is not None:
            rec["dynamodb"] = dynamodb
        return rec

    def lambda_shape(self, raw: dict[str, Any]) -> dict[str, Any]:
        """What :func:`whimbrel.local.streams.lambda_record` makes of a GetRecords record
        (the local runtime's Lambda shape), without its recursion: the corpus nests
        10,000 deep. Binary values are written base64 already, as on the wire."""
        ddb = dict(raw["dynamodb"])
        ddb["ApproximateCreationDateTime"] = float(ddb["ApproximateCreationDateTime"])
        return {"eventID": raw["eventID"], "eventName": raw["eventName"],
                "eventVersion": "1.1", "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1", "dynamodb": ddb, "eventSourceARN": self.arn}

    def case(self, case: Case) -> dict[str, Any]:
        return self.record(case.new_image, event_name=case.event_name, dynamodb=case.dynamodb)


def waiting_runs(wb: Whimbrel) -> tuple[str, str]:
    """Two runs of a workflow that waits for signal ``go`` (``S``) and for alice's
    approval (``G``): one waiting, one cancelled; their execution ids."""
    wb.register_workflow(WorkflowDefinition("waiting", (
        ActivityDefinition("S", launcher=LauncherSpec.signal("go")),
        ActivityDefinition("G", launcher=LauncherSpec.approval(approvers=["alice"])))))
    waiting = wb.start_workflow("waiting", request_id="waiting")
    ended = wb.start_workflow("waiting", request_id="ended")
    wb.cancel_workflow(ended)
    return waiting, ended


def snapshot(wb: Whimbrel, skip: Iterable[str] = ()) -> list[str]:
    """Every stored item (the rejection log aside) as text, minus those mentioning a
    ``skip`` id: the workflows the good records of a batch were allowed to change."""
    skip = tuple(skip)
    out: list[str] = []
    for spec in specs.TABLES:
        if spec is specs.REJECTION:
            continue
        name = spec.table_name(wb.table_prefix)
        kwargs: dict[str, Any] = {"TableName": name, "ConsistentRead": True}
        while True:
            # Through the store's own transport: DynamoDB Local's, or the in-memory twin.
            page = wb.store.transport.call("Scan", kwargs)
            out += [f"{spec.logical_name} {json.dumps(item, sort_keys=True, default=str)}"
                    for item in page["Items"]]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return without(out, skip)


def without(items: list[str], skip: Iterable[str]) -> list[str]:
    skip = tuple(skip)
    return sorted(i for i in items if not any(s in i for s in skip))


def rejections_by_seq(wb: Whimbrel, source: str) -> dict[str, Any]:
    """Rejection rows of ``source``, by the sequence number of their record: on the
    records' day, or on the clock's for a record without a creation time."""
    rows = wb.list_rejections(day=DAY, limit=None) + wb.list_rejections(limit=None)
    return {r.rejection_id.rsplit("-", 1)[1]: r for r in rows if r.source == source}


Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


Good = Callable[[], tuple[dict[str, Any], str]]


def run_corpus(wb: Whimbrel, handler: Handler, stream: Stream, source: str,
               corpus: list[Case], good: Good, applied: Callable[[str], bool],
               skip: Iterable[str] = ()) -> tuple[list[str], list[dict[str, Any]]]:
    """Feed each case in a batch ``[good, bad, good]``; returns the problems found and the
    bad records (for :func:`replay`).

    ``good()`` makes a good record and the id of what it changes; ``applied(id)`` says
    whether that good record took effect. Items mentioning those ids or ``skip`` are left
    out of the before/after comparison.
    """
    ctx = LambdaContext("bad-input", wb)
    wrong: list[str] = []
    bad_records: list[dict[str, Any]] = []
    touched: list[str] = list(skip)
    stored = snapshot(wb)
    for case in corpus:
        (g1, w1), bad, (g2, w2) = good(), stream.case(case), good()
        touched += [w1, w2]
        before = without(stored, touched)
        try:
            response = handler({"Records": [g1, bad, g2]}, ctx)
        except Exception as exc:  # the batch itself must never die
            wrong.append(f"{case.label}: handler raised {type(exc).__name__}: {exc}"[:300])
            continue
        bad_records.append(bad)
        if response != {"batchItemFailures": []}:
            wrong.append(f"{case.label}: response {response}")
        if not (applied(w1) and applied(w2)):
            wrong.append(f"{case.label}: a good record around it did not take effect")
        stored = snapshot(wb)
        if without(stored, touched) != before:
            wrong.append(f"{case.label}: changed what was stored")
        seq = (bad["dynamodb"]["SequenceNumber"] if isinstance(bad["dynamodb"], dict)
               else bad["eventID"])
        row = rejections_by_seq(wb, source).get(seq)
        if case.words is None:
            if row is not None:
                wrong.append(f"{case.label}: should be ignored, was rejected: {row.reason}")
        elif row is None:
            wrong.append(f"{case.label}: no rejection row")
        elif case.words not in row.reason or not row.error_type:
            wrong.append(f"{case.label}: reason {row.reason!r} lacks {case.words!r}"[:400])
    return wrong, bad_records


def replay(wb: Whimbrel, handler: Handler, source: str, bad: list[dict[str, Any]],
           good: Good, applied: Callable[[str], bool], skip: Iterable[str] = ()) -> None:
    """The whole corpus again in one batch, a good record after every bad one: no batch
    item failure, every good record applied, the same rejection rows, nothing else changed.
    """
    rows_before = rejections_by_seq(wb, source)
    batch: list[dict[str, Any]] = []
    goods: list[str] = []
    for record in bad:
        rec, ident = good()
        batch += [record, rec]
        goods.append(ident)
    before = snapshot(wb, [*goods, *skip])
    response = handler({"Records": batch}, LambdaContext("replay", wb))
    assert response == {"batchItemFailures": []}
    assert all(applied(i) for i in goods)
    rows_after = rejections_by_seq(wb, source)
    assert {k: r.reason for k, r in rows_after.items()} == {
        k: r.reason for k, r in rows_before.items()}
    assert snapshot(wb, [*goods, *skip]) == before


def corpus_findings(corpus: Iterable[tuple[str, Callable[..., Any], type[BaseException], str]],
                    args: tuple[Any, ...], snapshot_now: Callable[[], Any]) -> list[str]:
    """Run each ``(label, call, expected, words)`` of a bad-input corpus; returns what went
    wrong: accepted, escaped the error tree, the wrong error or message, or a change to
    what was stored (``snapshot_now`` is compared before and after each case)."""
    before = snapshot_now()
    wrong: list[str] = []
    for label, call, expected, words in corpus:
        try:
            call(*args)
        except WhimbrelError as exc:
            if not isinstance(exc, expected) or words not in str(exc):
                wrong.append(f"{label}: {type(exc).__name__}: {exc}"[:300])
        except Exception as exc:  # anything outside the error tree is a finding
            wrong.append(f"{label}: escaped the error tree: {type(exc).__name__}: {exc}"[:300])
        else:
            wrong.append(f"{label}: accepted")
        after = snapshot_now()
        if after != before:
            wrong.append(f"{label}: changed what was stored")
            before = after
    return wrong
