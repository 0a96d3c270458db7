"""Issue 20: the console shows a LOST attempt and an attempt's late output (a result that
came after the system gave up on it), over plain HTTP."""

from __future__ import annotations

import html
from collections.abc import Iterator

import boto3
import pytest
from test_console_http import http
from ui_support import Console, console

from whimbrel import (
    ActivityDefinition,
    ActivityState,
    ActivityTimedOut,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.testing import StepClock

EXT = LauncherSpec.external()


@pytest.fixture
def stepped(ddb_endpoint: str, table_prefix: str) -> Iterator[tuple[Console, StepClock]]:
    clock = StepClock()
    wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix, clock=clock)
    wb.create_tables()
    with console(wb) as con:
        yield con, clock
    wb.close()
    wb.store.delete_tables()


def test_the_run_page_shows_lost_attempts_and_late_output(
        stepped: tuple[Console, StepClock]) -> None:
    con, clock = stepped
    wb = con.wb
    wb.register_workflow(WorkflowDefinition("i20_console_late", (ActivityDefinition(
        "w", launcher=EXT, retry=RetryPolicy(max_attempts=3, initial_interval_seconds=0)),)))
    wx = wb.start_workflow("i20_console_late")
    first = wb.claim(workflow_name="i20_console_late")
    assert first is not None
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    ddb.delete_item(TableName=f"{wb.table_prefix}activity_exec", Key={
        "workflow_exec_id": {"S": wx}, "activity_exec_id": {"S": first.activity_exec_id}})
    for _ in range(2):
        wb.sweep(clock.advance(2 * 3600))
    assert wb.get_activity(first.activity_exec_id).state is ActivityState.LOST
    with pytest.raises(ActivityTimedOut):
        wb.transition_activity(first.activity_exec_id, "COMPLETED", output={"rows": 4242})
    page = http(con.url(f"/runs/{wx}"))
    assert page.status == 200
    body = html.unescape(page.body)
    assert "s-LOST" in body and "late output" in body and "4242" in body
