"""The notify consumer on DynamoDB Local: records read from the real streams through the
consumers' own filters, delivered again and again, crashed at every write — each event
published exactly once (docs/events.md, "Exactly once")."""

from __future__ import annotations

import io
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest
from notify_support import (
    FlakyPublisher,
    expected_ids,
    make_runs,
    notify_records,
    schema_errors,
)

from whimbrel import ActivityDefinition as Act
from whimbrel import Whimbrel, WorkflowDefinition
from whimbrel.contract.ids import activity_exec_id
from whimbrel.contract.notifications import DetailType
from whimbrel.local.runtime import LambdaContext
from whimbrel.observe import EmfMetrics, MemoryPublisher, NotifyOutcome, PublishError
from whimbrel.store.parts.notifications import Claim
from whimbrel.testing import Crash, FaultInjector

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # lambdas/ sits next to whimbrel/ in the checkout
    sys.path.append(str(ROOT))

from lambdas import activity_event, notify  # noqa: E402


def test_each_fact_is_published_once_however_often_its_record_arrives(wb: Whimbrel) -> None:
    runs = make_runs(wb)
    records = notify_records(wb)
    publisher = MemoryPublisher()
    notifier = wb.notifier(publisher)
    outcomes: Counter[NotifyOutcome] = Counter()
    # Every record three times, then all again backwards (a late replay of each).
    for record in [r for r in records for _ in range(3)] + records[::-1]:
        outcomes[notifier.process(record).outcome] += 1

    ids = publisher.event_ids()
    assert sorted(ids) == sorted(expected_ids(runs))  # each expected event, once
    # The filters passed exactly the records that can be events, plus x's first failure
    # (FAILED, but a retry followed: the handler decides, not the filter).
    assert len(records) == len(ids) + 1
    assert outcomes[NotifyOutcome.PUBLISHED] == len(ids)
    assert outcomes[NotifyOutcome.IGNORED] == 4  # attempt 1 of x, each delivery
    assert outcomes[NotifyOutcome.DUPLICATE] == 3 * len(ids)
    for event_id in ids:
        marker = wb.store.markers.get_notification(event_id)
        assert marker is not None and marker["status"] == "SENT" and marker["attempts"] == 1
        assert marker["expires_epoch"] > wb.clock() + 86_400  # outlives any redelivery

    by_id = {n.event_id: n for n in publisher.published}
    for note in by_id.values():
        assert schema_errors(note.envelope()) == []
    ok = by_id[f"{runs['ok']}/ended/0"].detail
    assert ok["state"] == "COMPLETED" and ok["workflow_name"] == "ev_ok"
    assert ok["output"] == {"b": wb.get_workflow(runs["ok"]).output["b"]}
    failed = by_id[f"{runs['retried']}:x:2/failed"]
    assert failed.detail_type is DetailType.ACTIVITY_FAILED
    assert (failed.detail["attempt"], failed.detail["max_attempts"]) == (2, 2)
    assert failed.detail["error"] == "planned failure 2"
    assert by_id[f"{runs['retried']}/ended/0"].detail["state"] == "FAILED"
    assert by_id[f"{runs['cancelled']}/ended/0"].detail["state"] == "CANCELLED"
    approve = by_id[f"{runs['waits']}:approve:1/waiting"].detail
    assert (approve["waiting_for"], approve["approvers"]) == ("approval", ["ana", "bo"])
    assert approve["deadline_at"] is not None
    hold = by_id[f"{runs['waits']}:hold:1/waiting"].detail
    assert hold["waiting_for"] == "timer:cool-down" and "approvers" not in hold


def _one_end(wb: Whimbrel) -> tuple[dict[str, Any], str]:
    """The record of a run's end (a cancelled run), and its event id."""
    wb.register_workflow(WorkflowDefinition("ev_crash", (Act("e"),)))
    wx = wb.start_workflow("ev_crash")
    wb.cancel_workflow(wx)
    [record] = notify_records(wb)
    return record, f"{wx}/ended/0"


def _forget(wb: Whimbrel, event_id: str) -> None:
    boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1").delete_item(
        TableName=wb.store.markers.notification_table, Key={"event_id": {"S": event_id}})


def test_crash_at_every_write_then_redelivery_loses_nothing(wb: Whimbrel) -> None:
    record, event_id = _one_end(wb)
    counter = FaultInjector()  # counts the writes of a clean delivery
    wb.store.write_hooks.append(counter)
    wb.notifier(MemoryPublisher()).process(record)
    wb.store.write_hooks.remove(counter)
    # The feature's whole price per event: the claim and the SENT mark.
    assert [(op, table) for _, op, table in counter.writes] == [
        ("PutItem", "notification"), ("UpdateItem", "notification")]

    for at in range(1, len(counter.writes) + 1):
        for phase in ("before", "after"):
            _forget(wb, event_id)
            publisher = MemoryPublisher()
            crash = FaultInjector(at=at, phase=phase)
            wb.store.write_hooks.append(crash)
            with pytest.raises(Crash):
                wb.notifier(publisher).process(record)
            wb.store.write_hooks.remove(crash)
            for _ in range(3):  # the record, redelivered
                wb.notifier(publisher).process(record)
            copies = publisher.event_ids().count(event_id)
            # The one documented window: published, then died before the SENT mark
            # landed. The retry publishes the same event (same event_id) again.
            window = (at, phase) == (2, "before")
            assert copies == (2 if window else 1), (at, phase, copies)
            assert wb.store.markers.get_notification(event_id)["status"] == "SENT"  # type: ignore[index]


def test_a_failed_publish_leaves_the_marker_pending_and_the_retry_sends(wb: Whimbrel) -> None:
    record, event_id = _one_end(wb)
    publisher = FlakyPublisher([event_id])
    notifier = wb.notifier(publisher)
    with pytest.raises(PublishError) as failed:
        notifier.process(record)
    assert failed.value.retryable  # the handler reports it; Lambda retries the record
    assert wb.store.markers.get_notification(event_id)["status"] == "PENDING"  # type: ignore[index]
    result = notifier.process(record)
    assert result.outcome is NotifyOutcome.PUBLISHED and result.resumed == (event_id,)
    marker = wb.store.markers.get_notification(event_id)
    assert marker is not None and (marker["status"], marker["attempts"]) == ("SENT", 2)
    assert notifier.process(record).outcome is NotifyOutcome.DUPLICATE
    assert publisher.ids() == [event_id]


def test_a_pending_marker_is_taken_over_by_one_delivery_only(wb: Whimbrel) -> None:
    store, now = wb.store, wb.clock()
    args = {"detail_type": "Workflow Ended", "workflow_exec_id": "wx", "now": now}
    assert store.markers.claim_notification("wx/ended/0", **args) is Claim.NEW
    assert store.markers.claim_notification("wx/ended/0", **args) is Claim.RESUMED  # attempts 2
    # A second delivery that read the marker before that takeover loses the condition
    # and is retried (it then finds the event SENT, or takes the marker over itself).
    with pytest.raises(Exception, match="being published by another delivery") as lost:
        store.markers._take_over("wx/ended/0", 1, now)
    assert getattr(lost.value, "retryable", False)
    store.markers.mark_notification_sent("wx/ended/0", now=now)
    assert store.markers.claim_notification("wx/ended/0", **args) is Claim.SENT
    assert store.markers._take_over("wx/ended/0", 2, now) is Claim.SENT


def test_records_that_can_make_no_event_are_rejected_not_retried(wb: Whimbrel) -> None:
    notifier = wb.notifier(MemoryPublisher())
    bogus = {"eventName": "MODIFY", "eventID": "e1", "dynamodb": {
        "SequenceNumber": "111", "ApproximateCreationDateTime": wb.clock(),
        "NewImage": {"workflow_exec_id": {"S": "wx"}, "state": {"S": "EXPLODED"}},
        "OldImage": {"workflow_exec_id": {"S": "wx"}, "state": {"S": "RUNNING"}}}}
    ghost = {"eventName": "MODIFY", "eventID": "e2", "dynamodb": {
        "SequenceNumber": "222", "ApproximateCreationDateTime": wb.clock(),
        "NewImage": {"workflow_exec_id": {"S": "wx"}, "activity_exec_id": {"S": "wx:a:1"},
                     "activity_name": {"S": "a"}, "workflow_name": {"S": "never_registered"},
                     "workflow_version": {"N": "1"}, "attempt": {"N": "1"},
                     "state": {"S": "FAILED"}},
        "OldImage": {"state": {"S": "RUNNING"}}}}
    for record, why in ((bogus, "does not decode"), (ghost, "never_registered")):
        result = notifier.process(record)
        assert result.outcome is NotifyOutcome.REJECTED and why in (result.reason or "")
    rejected = {r.record["eventID"]: r for r in wb.list_rejections()}
    assert {r.source for r in rejected.values()} == {"notify"}
    assert rejected["e2"].error_type == "DefinitionNotFound"


def test_handler_reports_only_the_records_whose_publish_failed(wb: Whimbrel) -> None:
    runs = make_runs(wb)
    records = notify_records(wb)
    failing = f"{runs['cancelled']}/ended/0"
    publisher = FlakyPublisher([failing], always=True)
    response = notify.handler({"Records": records}, LambdaContext("notify", wb, publisher))
    [failed] = response["batchItemFailures"]
    [record] = [r for r in records if r["dynamodb"]["SequenceNumber"] ==
                failed["itemIdentifier"]]
    assert runs["cancelled"] in json.dumps(record)
    assert sorted(publisher.ids()) == sorted(expected_ids(runs) - {failing})
    publisher.failing.clear()  # the bus is back: Lambda retries the failed record
    assert notify.handler({"Records": [record]}, LambdaContext("notify", wb, publisher)) == {
        "batchItemFailures": []}
    assert sorted(publisher.ids()) == sorted(expected_ids(runs))


# -- metrics from every path ------------------------------------------------------------


def _emf(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith('{"_aws"')]


def test_the_in_process_engine_reports_every_end_once(ddb_endpoint: str, table_prefix: str,
                                                      wb: Whimbrel) -> None:
    out = io.StringIO()
    client = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                      metrics=EmfMetrics(table_prefix, stream=out))
    try:
        runs = make_runs(client)
    finally:
        client.close()
    lines = _emf(out.getvalue())
    ended = Counter((d["WorkflowName"], d["State"]) for d in lines if "WorkflowsEnded" in d)
    assert ended == Counter({("ev_ok", "COMPLETED"): 1, ("ev_retried", "FAILED"): 1,
                             ("ev_cancel", "CANCELLED"): 1})
    attempts = Counter((d["ActivityName"], d["State"]) for d in lines if "ActivitiesEnded" in d)
    assert attempts == Counter({("a", "COMPLETED"): 1, ("b", "COMPLETED"): 1,
                                ("x", "FAILED"): 2, ("e", "CANCELLED"): 1})
    durations = [d for d in lines if "ActivityDuration" in d]
    assert {d["ActivityName"] for d in durations} == {"a", "b", "x"}  # e never ran
    assert all(d["TablePrefix"] == table_prefix for d in lines)
    assert runs  # the facts themselves are the other tests' business


def test_the_lambdas_report_ends_when_configured_by_the_environment(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], wb: Whimbrel,
        ddb_endpoint: str, table_prefix: str) -> None:
    monkeypatch.setenv("WHIMBREL_METRICS", "emf")  # what the construct sets on each function
    monkeypatch.setenv("WHIMBREL_ENDPOINT_URL", ddb_endpoint)
    monkeypatch.setenv("WHIMBREL_TABLE_PREFIX", table_prefix)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    lambda_client = Whimbrel.from_env(actor="lambda")
    assert isinstance(lambda_client.engine.metrics, EmfMetrics)
    assert lambda_client.as_actor("other").engine.metrics is lambda_client.engine.metrics
    try:
        wb.register_workflow(WorkflowDefinition("ev_simple", (Act("s"),)))
        wx = wb.start_workflow("ev_simple")
        aeid = activity_exec_id(wx, "s", 1)
        wb.transition_activity(aeid, "RUNNING")
        capsys.readouterr()
        record = {"eventName": "INSERT", "eventID": "ev1", "dynamodb": {
            "SequenceNumber": "1", "ApproximateCreationDateTime": wb.clock(),
            "NewImage": {"activity_event_id": {"S": "ev1"}, "activity_exec_id": {"S": aeid},
                         "transition": {"S": "COMPLETED"},
                         "when_epoch": {"N": str(int(wb.clock()))}}}}
        response = activity_event.handler({"Records": [record]},
                                          LambdaContext("activity_event", lambda_client))
    finally:
        lambda_client.close()
    assert response == {"batchItemFailures": []}
    lines = _emf(capsys.readouterr().out)
    assert [(d.get("ActivityName"), d["State"]) for d in lines] == [
        ("s", "COMPLETED"), (None, "COMPLETED")]
    assert lines[1]["WorkflowsEnded"] == 1.0 and lines[1]["WorkflowName"] == "ev_simple"


def test_a_redriven_run_announces_each_of_its_ends(wb: Whimbrel) -> None:
    """A redrive makes a second end of the same run: a second event, told apart by the
    run's redrive_count, each still published once however often its record arrives."""
    wb.register_workflow(WorkflowDefinition("ev_redrive", (Act("a"),)))
    wx = wb.start_workflow("ev_redrive")
    first = wb.claim(workflow_name="ev_redrive")
    assert first is not None
    wb.transition_activity(first.activity_exec_id, "FAILED", error="broken")
    wb.redrive_workflow(wx)
    second = wb.claim(workflow_name="ev_redrive")
    assert second is not None and second.attempt == 2
    wb.transition_activity(second.activity_exec_id, "COMPLETED", output={"fixed": True})
    assert wb.get_workflow(wx).state.value == "COMPLETED"

    publisher = MemoryPublisher()
    notifier = wb.notifier(publisher)
    records = notify_records(wb)
    for record in records + records[::-1]:
        notifier.process(record)
    by_id = {n.event_id: n for n in publisher.published}
    assert sorted(publisher.event_ids()) == sorted(
        [f"{wx}/ended/0", f"{wx}/ended/1", f"{first.activity_exec_id}/failed"])
    assert by_id[f"{wx}/ended/0"].detail["state"] == "FAILED"
    assert by_id[f"{wx}/ended/1"].detail["state"] == "COMPLETED"
    assert by_id[f"{wx}/ended/1"].detail["redrive_count"] == 1
    for note in by_id.values():
        assert schema_errors(note.envelope()) == []
