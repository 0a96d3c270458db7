"""Issue 30's console pages and fixes over plain HTTP: pools (no 404), search by run id,
start a run (a form, behind the token and CSRF field, that keeps what was typed on an
error), schedule pause / resume / fire now, the approver's name in the timeline, and
attempts counted from a redrive's fresh budget."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from test_console_http import CSRF, cookie, http
from ui_support import Console, console

from whimbrel import (
    ActivityDefinition,
    LauncherSpec,
    RetryPolicy,
    Transition,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.testing import fresh_table_prefix

EXT = LauncherSpec.external()
ONE = WorkflowDefinition("one", (ActivityDefinition("work", launcher=EXT),))


@pytest.fixture(scope="module")
def con(module_ddb_endpoint: str) -> Iterator[Console]:
    wb = Whimbrel(endpoint_url=module_ddb_endpoint, table_prefix=fresh_table_prefix())
    wb.create_tables()
    wb.register_workflow(ONE)
    with console(wb) as c:
        yield c
    wb.close()
    wb.store.delete_tables()


def signed(con: Console) -> dict[str, str]:
    return {"Cookie": cookie(con), "Origin": con.server.url}


def flat(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_pools_page_shows_slots_held_waiting_and_rate(con: Console) -> None:
    assert "No pools yet" in http(con.url("/pools")).body
    wb = con.wb
    wb.set_pool("gpu", slots=1, per_second=None)
    wb.set_pool("api", slots=None, per_second=2.5)
    wb.register_workflow(WorkflowDefinition("gpu_job", (
        ActivityDefinition("train", launcher=EXT, pool="gpu"),)))
    for _ in range(3):
        wb.start_workflow("gpu_job")
    page = http(con.url("/pools"))
    assert page.status == 200 and 'href="/pools" class="active"' in page.body
    row = re.search(r'<tr data-pool="gpu">(.*?)</tr>', page.body, re.S)
    assert row is not None
    cells = flat(row.group(1))
    info = wb.get_pool("gpu")
    assert info.in_use == 1 and info.waiting == 2
    assert cells.startswith("gpu 1 1 2 no limit"), cells
    api = re.search(r'<tr data-pool="api">(.*?)</tr>', page.body, re.S)
    assert api is not None and "2.5/s" in api.group(1) and "no limit" in api.group(1)


def test_search_opens_a_run_by_its_id_or_an_attempt_id(con: Console) -> None:
    wx = con.wb.start_workflow("one")
    found = http(con.url(f"/search?q={wx}"))
    assert found.status == 303 and found.headers["Location"] == f"/runs/{wx}"
    attempt = http(con.url(f"/search?q={quote(wx + ':work:1')}"))
    assert attempt.status == 303 and attempt.headers["Location"] == f"/runs/{wx}#act-work"
    missing = http(con.url("/search?q=00000000-0000-4000-8000-000000000000"))
    assert missing.status == 404 and "no run 00000000-0000-4000-8000-000000000000" \
        in missing.body
    empty = http(con.url("/search?q="))
    assert empty.status == 400 and "type a run id" in empty.body
    junk = http(con.url("/search?q=" + quote("a:b")))
    assert junk.status == 400 and "neither a run id nor an attempt id" in flat(junk.body)


def test_start_a_run_from_the_form(con: Console) -> None:
    form_page = http(con.url("/start?workflow=one"))
    assert form_page.status == 200 and '<option value="one" selected>' in form_page.body
    form = {"workflow": "one", "input": '{"day": "2026-11-21"}',
            "attributes": "customer=c-9, n=3", "request_id": "console-start-1",
            "csrf": CSRF}
    # Without the token nothing starts.
    refused = http(con.url("/start"), method="POST", form=form)
    assert refused.status == 403
    assert not con.wb.list_workflows(attributes={"customer": "c-9"}).items
    done = http(con.url("/start"), method="POST", form=form, headers=signed(con))
    assert done.status == 303
    wx = done.headers["Location"].split("/runs/")[1].split("?")[0]
    wf = con.wb.get_workflow(wx)
    assert wf.input == {"day": "2026-11-21"} and wf.attributes == {"customer": "c-9", "n": 3}
    assert "Run started." in http(con.url(done.headers["Location"])).body
    # The same request id: the same run, not a second one.
    again = http(con.url("/start"), method="POST", form=form, headers=signed(con))
    assert again.headers["Location"].split("/runs/")[1].split("?")[0] == wx


def test_a_bad_start_says_what_to_fix_and_keeps_what_was_typed(con: Console) -> None:
    typed = '{"day": 2026-11-21}'
    bad = http(con.url("/start"), method="POST", headers=signed(con),
               form={"workflow": "one", "input": typed, "csrf": CSRF})
    assert bad.status == 400 and "input is not valid JSON" in bad.body
    assert typed in html.unescape(bad.body)  # nothing typed is lost
    unknown = http(con.url("/start"), method="POST", headers=signed(con),
                   form={"workflow": "nope", "input": "", "csrf": CSRF})
    assert unknown.status == 400 and "nope" in flat(unknown.body)
    none = http(con.url("/start"), method="POST", headers=signed(con),
                form={"workflow": "", "input": "{}", "csrf": CSRF})
    assert none.status == 400 and "choose the workflow to start" in none.body


def test_schedules_pause_resume_and_fire_now(con: Console) -> None:
    wb = con.wb
    wb.create_schedule("ui-ops", "one", every_seconds=3600, input={"from": "schedule"},
                       attributes={"team": "ops"})
    page = http(con.url("/schedules"), headers=signed(con)).body
    assert 'action="/schedules/ui-ops/pause"' in page and 'action="/schedules/ui-ops/fire"' \
        in page

    def post(verb: str, headers: dict[str, str] | None = None) -> int:
        return http(con.url(f"/schedules/ui-ops/{verb}"), method="POST",
                    form={"csrf": CSRF}, headers=headers).status

    assert post("pause") == 403 and wb.get_schedule("ui-ops").status == "ACTIVE"
    assert post("pause", signed(con)) == 303 and wb.get_schedule("ui-ops").status == "PAUSED"
    shown = http(con.url("/schedules?done=paused&schedule=ui-ops")).body
    assert "Schedule ui-ops paused." in shown and 'action="/schedules/ui-ops/resume"' in shown
    assert post("resume", signed(con)) == 303 and wb.get_schedule("ui-ops").status == "ACTIVE"
    assert post("fire", signed(con)) == 303
    [run] = wb.list_workflows(attributes={"team": "ops"}).items
    assert run.input == {"from": "schedule"} and run.workflow_request_id.startswith("ui-ops@")
    assert post("explode", signed(con)) == 404
    wb.delete_schedule("ui-ops")


def test_an_approval_is_credited_to_the_approver(con: Console) -> None:
    wb = con.wb
    wb.register_workflow(WorkflowDefinition("gate", (
        ActivityDefinition("ok", launcher=LauncherSpec.approval()),
        ActivityDefinition("no", launcher=LauncherSpec.approval()))))
    wx = wb.start_workflow("gate")
    wb.approve(f"{wx}:ok:1", by="Ana Lima", comment="fine")
    wb.reject(f"{wx}:no:1", by="Bo", comment="not today: see ticket")
    rows = re.findall(r"<tr><td class=\"mono\">.*?</tr>", http(con.url(f"/runs/{wx}")).body,
                      re.S)
    said = [flat(r) for r in rows]
    assert any("ok #1" in r and "COMPLETED" in r and "Ana Lima" in r for r in said), said
    assert any("no #1" in r and "FAILED" in r and " Bo " in r for r in said), said


def test_attempts_after_a_redrive_count_from_its_fresh_budget(con: Console) -> None:
    wb = con.wb
    wb.register_workflow(WorkflowDefinition("once", (ActivityDefinition(
        "w", launcher=EXT, retry=RetryPolicy(max_attempts=1)),)))
    wx = wb.start_workflow("once")
    wb.transition_activity(f"{wx}:w:1", Transition.RUNNING)
    wb.transition_activity(f"{wx}:w:1", Transition.FAILED, error="boom")
    assert wb.wait(wx, timeout=30).state.value == "FAILED"
    wb.redrive_workflow(wx)
    page = http(con.url(f"/runs/{wx}")).body
    cells = {m.group(1): flat(m.group(2)) for m in re.finditer(
        r'data-attempt="(\d)".*?<td class="num"[^>]*>(.*?)</td>', page, re.S)}
    assert cells["2"] == "1 /1 after redrive", cells  # not "2/1"
    assert cells["1"] == "1 /1", cells
    node = re.search(r'<g class="node[^"]*"[^>]*data-activity="w".*?</g>', page, re.S)
    assert node is not None and "try" not in node.group(0)  # not "try 2" either
