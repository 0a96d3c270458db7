"""Issue 27, the console: a large payload shows as a preview with a link that downloads
it whole, never as a page of megabytes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from test_console_http import http
from ui_support import Console, console

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.contract.ids import activity_exec_id

MB = 1_000_000


@pytest.fixture
def con(ddb_endpoint: str, table_prefix: str, payload_bucket: str) -> Iterator[Console]:
    wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                  payload_bucket=payload_bucket)
    wb.create_tables()
    with console(wb) as c:
        yield c
    wb.close()
    wb.store.delete_tables()


def test_a_large_output_is_a_preview_and_a_download(con: Console) -> None:
    wb = con.wb
    wb.register_workflow(WorkflowDefinition("bigpage", (
        ActivityDefinition("a", launcher=LauncherSpec.external()),)))
    wx = wb.start_workflow("bigpage", {"pad": "i" * (3 * MB)})
    aeid = activity_exec_id(wx, "a", 1)
    wb.transition_activity(aeid, "RUNNING")
    wb.transition_activity(aeid, "COMPLETED", output={"rows": ["o" * 100] * 50_000})
    page = http(con.url(f"/runs/{wx}"))
    assert page.status == 200
    assert len(page.body) < 200_000, len(page.body)  # a preview, not 8 MB of JSON
    assert f'href="/runs/{wx}/input.json"' in page.body
    assert f'href="/runs/{wx}/outputs/{aeid}.json"' in page.body
    whole = http(con.url(f"/runs/{wx}/outputs/{aeid}.json"))
    assert whole.status == 200
    assert whole.headers["Content-Type"] == "application/json"
    assert json.loads(whole.body) == {"rows": ["o" * 100] * 50_000}
    assert json.loads(http(con.url(f"/runs/{wx}/input.json")).body) == {"pad": "i" * (3 * MB)}
    other = http(con.url(f"/runs/{wx}/outputs/{activity_exec_id(wx + 'x', 'a', 1)}.json"))
    assert other.status in (400, 404)
