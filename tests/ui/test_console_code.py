"""The console's run page of a code run (issue 26): its steps as they ran, its
properties and its output, over plain HTTP."""

from __future__ import annotations

import html
import urllib.request

import wb_code_workflows as code
from ui_support import console

from whimbrel import Whimbrel


def test_a_code_runs_page_shows_its_steps_properties_and_output(
        ddb_endpoint: str, table_prefix: str) -> None:
    wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix)
    wb.create_tables()
    wb.register_workflow(code.props)
    wx = wb.start_workflow("props", {"order": "o-5"})
    wb.transition_activity(f"{wx}:gate#1:1", "RUNNING")
    wb.transition_activity(f"{wx}:gate#1:1", "COMPLETED", output="open")
    assert wb.wait(wx, timeout=20).state.value == "COMPLETED"
    with console(wb) as con, urllib.request.urlopen(con.url(f"/runs/{wx}"),
                                                    timeout=30) as resp:
        assert resp.status == 200
        page = html.unescape(resp.read().decode())
    assert "gate#1" in page and "A code workflow" in page
    assert "Properties" in page and '"stage": "done"' in page and '"order": "o-5"' in page
    wb.close()
    wb.store.delete_tables()
