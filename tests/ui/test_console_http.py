"""The console's guard and error pages over plain HTTP (no browser): the token, the
csrf field, foreign origins and host names, closed reads, and what bad requests get.
Also ``whimbrel ui`` itself, as a process."""

from __future__ import annotations

import html
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from urllib.parse import urlencode, urljoin, urlsplit

import pytest
from ui_support import TOKEN, Console, console

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.testing import fresh_table_prefix, wait_until
from whimbrel.ui.security import Guard

ONE_STEP = WorkflowDefinition("one", (
    ActivityDefinition("work", launcher=LauncherSpec.external()),))
CSRF = Guard(TOKEN, open_reads=True, allowed_hosts=None).csrf


@dataclass
class Reply:
    status: int
    headers: Message
    body: str


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def http(url: str, *, method: str = "GET", form: dict[str, str] | None = None,
         headers: dict[str, str] | None = None) -> Reply:
    data = urlencode(form).encode() if form is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with _OPENER.open(req, timeout=30) as resp:
            return Reply(resp.status, resp.headers, resp.read().decode())
    except urllib.error.HTTPError as err:
        return Reply(err.code, err.headers, err.read().decode())


@pytest.fixture(scope="module")
def con(module_ddb_endpoint: str) -> Iterator[Console]:
    wb = Whimbrel(endpoint_url=module_ddb_endpoint, table_prefix=fresh_table_prefix())
    wb.create_tables()
    wb.register_workflow(ONE_STEP)
    with console(wb) as c:
        yield c
    wb.close()
    wb.store.delete_tables()


def cookie(con: Console) -> str:
    return f"whimbrel_console_{con.server.port}={TOKEN}"


def test_pages_carry_security_headers(con: Console) -> None:
    reply = http(con.url("/runs"))
    assert reply.status == 200
    csp = reply.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert reply.headers["X-Frame-Options"] == "DENY"
    assert reply.headers["X-Content-Type-Options"] == "nosniff"
    assert reply.headers["Referrer-Policy"] == "no-referrer"
    assert "Read-only" in reply.body
    js = http(con.url("/static/htmx.min.js"))
    assert js.status == 200 and js.body.startswith("/*! htmx.org 2.0.11")
    assert "Zero-Clause BSD" in js.body[:400]


def test_sign_in_sets_a_strict_cookie_and_drops_the_token(con: Console) -> None:
    wrong = http(con.url("/runs?token=guess"))
    assert wrong.status == 403 and "wrong console token" in wrong.body
    right = http(con.url(f"/runs?workflow=one&token={TOKEN}"))
    assert right.status == 303 and right.headers["Location"] == "/runs?workflow=one"
    set_cookie = right.headers["Set-Cookie"]
    assert set_cookie.startswith(f"whimbrel_console_{con.server.port}={TOKEN};")
    assert "HttpOnly" in set_cookie and "SameSite=strict" in set_cookie
    page = http(con.url("/runs"), headers={"Cookie": cookie(con)})
    assert "Actions enabled" in page.body


def test_actions_need_token_csrf_and_same_origin(con: Console) -> None:
    wx = con.wb.start_workflow("one")
    url = con.url("/actions/cancel")
    same = {"Origin": con.server.url}
    cases = [
        ({}, {"target": wx, "csrf": CSRF}, "need the console token"),
        ({"Cookie": f"whimbrel_console_{con.server.port}=nope"}, {"target": wx, "csrf": CSRF},
         "need the console token"),
        ({"Cookie": cookie(con)}, {"target": wx}, "csrf"),
        ({"Cookie": cookie(con)}, {"target": wx, "csrf": "0" * 64}, "csrf"),
        ({"Cookie": cookie(con), "Origin": "http://evil.example"},
         {"target": wx, "csrf": CSRF}, "another site"),
    ]
    for headers, form, why in cases:
        reply = http(url, method="POST", form=form, headers=headers)
        assert reply.status == 403 and why in reply.body, (headers, form, reply.body[:300])
        assert con.wb.get_workflow(wx).state.value == "RUNNING"
    ok = http(url, method="POST", form={"target": wx, "csrf": CSRF},
              headers={"Cookie": cookie(con), **same})
    assert ok.status == 303 and ok.headers["Location"] == f"/runs/{wx}?done=cancel"
    assert con.wb.get_workflow(wx).state.value == "CANCELLED"
    # Once done, the same action is refused with the reason, not repeated.
    again = http(url, method="POST", form={"target": wx, "csrf": CSRF},
                 headers={"Cookie": cookie(con), **same})
    assert again.status == 409 and "Not possible any more: the run is CANCELLED" in again.body


def test_the_wait_actions_call_the_facade(con: Console) -> None:
    """Approve, Send signal, Suspend and Resume (issue 13) through the console."""
    con.wb.register_workflow(WorkflowDefinition("waiting", (
        ActivityDefinition("ok", launcher=LauncherSpec.approval(approvers=["ana"])),
        ActivityDefinition("paid", launcher=LauncherSpec.signal("paid")))))
    wx = con.wb.start_workflow("waiting")
    gate = f"{wx}:ok:1"
    auth = {"Cookie": cookie(con), "Origin": con.server.url}

    def act(action: str, target: str, **form: str) -> Reply:
        return http(con.url(f"/actions/{action}"), method="POST",
                    form={"target": target, "csrf": CSRF, **form}, headers=auth)

    page = http(con.url(f"/runs/{wx}"), headers={"Cookie": cookie(con)}).body
    assert "waits for approval" in page and "waits for signal:paid" in page
    form = http(con.url(f"/actions/signal?target={wx}"), headers={"Cookie": cookie(con)})
    assert form.status == 200 and 'value="paid"' in form.body  # the name is prefilled
    assert act("suspend", wx).status == 303
    assert con.wb.get_workflow(wx).state.value == "SUSPENDED"
    refused = act("approve", gate, by="bob")
    assert refused.status == 409 and "may not decide" in html.unescape(refused.body)
    assert act("approve", gate, by="ana", comment="fine").status == 303
    assert act("signal", wx, name="paid", payload='{"eur": 1}').status == 303
    assert act("resume", wx).status == 303
    wf = con.wb.get_workflow(wx)
    assert wf.state.value == "COMPLETED"
    assert wf.activity("ok").output["by"] == "ana" and wf.activity("paid").output == {"eur": 1}


def test_other_host_names_are_refused(con: Console) -> None:
    # A DNS-rebinding page reaches 127.0.0.1 under its own name: refuse it.
    reply = http(con.url("/runs"), headers={"Host": f"evil.example:{con.server.port}"})
    assert reply.status == 400
    assert http(con.url("/runs"), headers={"Host": f"localhost:{con.server.port}"}
                ).status == 200


def test_bad_requests_get_pages_that_say_why(con: Console) -> None:
    wx = con.wb.start_workflow("one")
    bad_cursor = http(con.url("/runs?cursor=garbage"))
    assert bad_cursor.status == 400 and "is not a cursor list_workflows returned" in bad_cursor.body
    bad_since = http(con.url("/runs?since=soonish"))
    assert bad_since.status == 400 and "since &#39;soonish&#39; is not a time" in bad_since.body
    assert http(con.url("/runs/no-such-run")).status == 404
    assert http(con.url("/definitions/nope")).status == 404
    assert http(con.url("/definitions/one?version=x")).status == 400
    assert http(con.url("/definitions/one?version=7")).status == 404
    assert http(con.url(f"/actions/explode?target={wx}")).status == 404
    # An action the facade offers, asked for a run it does not apply to, says why.
    early = http(con.url(f"/actions/redrive?target={wx}"))
    assert early.status == 200 and "Not possible now: the run is RUNNING" in early.body
    bad_activity = http(con.url("/actions/retry?target=not-an-id"))
    assert bad_activity.status == 400 and "activity_exec_id" in bad_activity.body
    assert http(con.url("/healthz")).body == "ok"


def test_paging_keeps_the_window_of_an_age(con: Console) -> None:
    ids = [con.wb.start_workflow("one") for _ in range(7)]
    with console(con.wb, page_size=5) as small:
        first = http(small.url("/runs?workflow=one&since=24h"))
        assert first.status == 200
        shown = re.findall(r'data-run="([^"]+)"', first.body)
        assert shown[:5] == ids[::-1][:5] and len(shown) == 5
        older = re.search(r'href="(/runs\?[^"]*cursor=[^"]+)" rel="next"', first.body)
        assert older is not None
        # "24h" on the second page counts from the first page's time, not from now.
        second = http(small.url(html.unescape(older.group(1))))
        assert second.status == 200, re.findall(r"problem\">([^<]*)", second.body)
        rest = re.findall(r'data-run="([^"]+)"', second.body)
        assert rest[:2] == ids[::-1][5:7]
        assert "Paused while paging" in second.body


def test_reads_need_the_token_when_not_on_loopback_only(con: Console) -> None:
    with console(con.wb, open_reads=False) as closed:
        assert http(closed.url("/runs")).status == 403
        assert http(closed.url("/static/console.css")).status == 200
        signed = f"whimbrel_console_{closed.server.port}={TOKEN}"
        assert http(closed.url("/runs"), headers={"Cookie": signed}).status == 200


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(url: str) -> bool:
    try:
        return http(url).status == 200
    except urllib.error.URLError:
        return False  # not listening yet (it prints its URL before it binds)


def test_whimbrel_ui_prints_the_sign_in_url_and_serves(con: Console) -> None:
    port = _free_port()
    env = {**os.environ, "WHIMBREL_ENDPOINT_URL": str(con.wb.endpoint_url),
           "WHIMBREL_TABLE_PREFIX": con.wb.table_prefix, "WHIMBREL_UI_TOKEN": TOKEN,
           "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "whimbrel.cli", "ui", "--port", str(port)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        assert lines[0].startswith(f"Whimbrel console on http://127.0.0.1:{port}/")
        assert lines[2].strip() == f"http://127.0.0.1:{port}/?token={TOKEN}"
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/healthz"), timeout=20,
                   message="whimbrel ui never answered")
        assert "one" in http(f"http://127.0.0.1:{port}/definitions").body
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert proc.returncode == 0  # Ctrl-C is how it stops
    missing = subprocess.run(
        [sys.executable, "-m", "whimbrel.cli", "ui", "--port", str(port)],
        env={**env, "WHIMBREL_TABLE_PREFIX": "no_such_tables_"}, capture_output=True,
        text=True, timeout=60)
    assert missing.returncode == 6 and "whimbrel tables create" in missing.stderr


def test_maps_child_runs_and_redrive_in_the_console(con: Console) -> None:
    wb = con.wb
    wb.register_workflow(WorkflowDefinition("leaf", (
        ActivityDefinition("k", launcher=LauncherSpec.external()),)))
    wb.register_workflow(WorkflowDefinition("tree", (
        ActivityDefinition("each", launcher=LauncherSpec.external(), map_over="$input.xs"),
        ActivityDefinition("sub", launcher=LauncherSpec.workflow("leaf")))))
    wx = wb.start_workflow("tree", {"xs": [1, 2, 3]})
    [child] = wb.get_workflow(wx).child_workflow_exec_ids
    page = http(con.url(f"/runs/{wx}"))
    assert page.status == 200 and "0/3 done, 3 waiting" in page.body
    assert f'href="/runs/{child}"' in page.body  # the parent lists its child run
    assert f'href="/runs/{wx}"' in http(con.url(f"/runs/{child}")).body  # and back
    wb.cancel_workflow(wx)
    assert wb.wait(wx, timeout=30).state.value == "CANCELLED"
    same = {"Cookie": cookie(con), "Origin": con.server.url}
    done = http(con.url("/actions/redrive"), method="POST",
                form={"target": wx, "csrf": CSRF}, headers=same)
    assert done.status == 303 and done.headers["Location"] == f"/runs/{wx}?done=redrive"
    again = wb.get_workflow(wx)
    assert again.state.value == "RUNNING" and again.redrive_count == 1


def test_the_schedules_page_lists_schedules(con: Console) -> None:
    assert "No schedules yet" in http(con.url("/schedules")).body
    con.wb.create_schedule("ui-nightly", "one", cron="0 2 * * *", timezone="Europe/Berlin")
    con.wb.create_schedule("ui-paused", "one", every_seconds=600)
    con.wb.pause_schedule("ui-paused")
    page = http(con.url("/schedules"))
    assert page.status == 200
    assert 'data-schedule="ui-nightly"' in page.body and "0 2 * * *" in page.body
    assert "Europe/Berlin" in page.body and "PAUSED" in page.body
    assert 'href="/schedules" class="active"' in page.body
    for sid in ("ui-nightly", "ui-paused"):
        con.wb.delete_schedule(sid)


def test_queued_runs_are_filtered_counted_and_cancelled(con: Console) -> None:
    con.wb.register_workflow(WorkflowDefinition("capped", (
        ActivityDefinition("work", launcher=LauncherSpec.external()),), max_running=1))
    first, queued = con.wb.start_workflow("capped"), con.wb.start_workflow("capped")
    page = http(con.url("/runs?workflow=capped&state=QUEUED"))
    assert page.status == 200
    assert re.findall(r'data-run="([^"]+)"', page.body) == [queued]
    counts = http(con.url("/runs/counts?workflow=capped&state=QUEUED")).body
    count = re.search(r'data-state="QUEUED">\s*<span class="n">(\d+)</span>', counts)
    assert count is not None and count.group(1) == "1"
    shown = http(con.url(f"/runs/{queued}"))
    assert shown.status == 200 and "QUEUED" in shown.body and "Cancel run" in shown.body
    # Issue 30: a QUEUED run said "running for 9 min"; it waits, and says why.
    assert "running for" not in shown.body
    assert "waiting to start for" in shown.body and "at most 1 run of capped" in shown.body
    con.wb.cancel_workflow(queued)
    assert con.wb.get_workflow(queued).state.value == "CANCELLED"
    assert con.wb.get_workflow(first).state.value == "RUNNING"


def test_an_odd_stored_schedule_is_shown_with_its_problem(con: Console) -> None:
    """Issue 31: a stored spec this version cannot read answered 500 for the whole page."""
    con.wb.create_schedule("ui-odd", "one", every_seconds=600)
    con.wb.create_schedule("ui-newer", "one", every_seconds=600)
    table = con.wb.store.table_name("schedule")
    for sid, spec in (("ui-odd", {"schedule_id": "ui-odd", "workflow_name": "one",
                                  "every_seconds": "ten minutes"}),
                      ("ui-newer", {"schedule_id": "ui-newer", "workflow_name": "one",
                                    "every_seconds": 600, "jitter_seconds": 5})):
        con.wb.store.tables.client.call("UpdateItem", {
            "TableName": table, "Key": {"schedule_id": {"S": sid}},
            "UpdateExpression": "SET spec = :s",
            "ExpressionAttributeValues": {":s": {"S": json.dumps(spec)}}})
    page = http(con.url("/schedules"))
    assert page.status == 200
    assert 'data-schedule="ui-odd"' in page.body and 'data-schedule="ui-newer"' in page.body
    problem = re.search(r"<td class=\"error-cell\" data-problem>([^<]*)</td>", page.body)
    assert problem is not None and "every_seconds must be a whole number" in \
        html.unescape(problem.group(1))
    assert page.body.count("data-problem") == 1  # the newer version's field is ignored
    for sid in ("ui-odd", "ui-newer"):
        con.wb.delete_schedule(sid)


def _raw_get(con: Console, target: str) -> tuple[int, dict[str, str]]:
    """``GET target`` sent byte for byte (no client library normalises it)."""
    with socket.create_connection((con.server.host, con.server.port), timeout=30) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {con.server.host}:{con.server.port}\r\n"
                     "Connection: close\r\n\r\n".encode("latin-1"))
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
    return int(head[0].split()[1]), headers


@pytest.mark.parametrize("path", [
    "//evil.example/x", "///evil.example/x", "/\\evil.example/x", "/\\/evil.example/x",
    "/%2F%2Fevil.example/x", "/%2Fevil.example/x", "/%5Cevil.example/x",
    "/%5C%5Cevil.example/x", "/%09/evil.example/x", "/%0A/evil.example", "/%2F%09/evil.example",
])
def test_the_sign_in_redirect_never_leaves_the_site(con: Console, path: str) -> None:
    """Issue 31: ``GET //evil.example/x?token=T`` answered ``303 Location:
    //evil.example/x``, which a browser follows to evil.example."""
    status, headers = _raw_get(con, f"{path}?token={TOKEN}&workflow=one")
    assert status == 303
    location = headers["location"]
    assert location.startswith("/") and location[1:2] not in ("/", "\\")
    assert not any(ord(c) < 0x21 or c == "\\" for c in location)
    # As a browser reads it: backslashes as slashes, tabs and newlines dropped.
    seen = location.replace("\\", "/").replace("\t", "").replace("\n", "").replace("\r", "")
    base = con.url("/runs")
    assert urlsplit(urljoin(base, seen)).netloc == urlsplit(base).netloc
    assert location.endswith("?workflow=one")


def test_the_sign_in_redirect_keeps_an_ordinary_page(con: Console) -> None:
    status, headers = _raw_get(con, f"/runs/some%20run?token={TOKEN}")
    assert (status, headers["location"]) == (303, "/runs/some%20run")


def test_runs_by_attribute_and_a_fork_from_an_activity(con: Console) -> None:
    """Issue 29: the runs page filters by an attribute; an activity's "Fork from here"
    starts the fork and shows it."""
    wb = con.wb
    wb.register_workflow(WorkflowDefinition("ui_fork", (
        ActivityDefinition("extract", launcher=LauncherSpec.external()),
        ActivityDefinition("transform", ("extract",), launcher=LauncherSpec.external()))))
    mine = wb.start_workflow("ui_fork", attributes={"customer": "ui-c-17"})
    other = wb.start_workflow("ui_fork", attributes={"customer": "ui-c-18"})
    page = http(con.url("/runs?" + urlencode({"attr": "customer=ui-c-17"})))
    assert page.status == 200 and mine in page.body and other not in page.body
    bad = http(con.url("/runs?attr=nokey"))
    assert bad.status == 400 and "is not KEY=VALUE" in html.unescape(bad.body)
    for _ in range(2):  # both runs' extract: claims come in no set order
        got = wb.claim(workflow_name="ui_fork", activity_name="extract")
        assert got is not None
        wb.transition_activity(got.activity_exec_id, "COMPLETED", output={"rows": 1})
    got = wb.get_workflow(mine).activity("extract")
    transform = f"{mine}:transform:1"
    assert "Fork from here" in http(con.url(f"/actions/fork?target={transform}")).body
    same = {"Cookie": cookie(con), "Origin": con.server.url}
    done = http(con.url("/actions/fork"), method="POST",
                form={"target": transform, "csrf": CSRF}, headers=same)
    assert done.status == 303, done
    new = done.headers["Location"].split("/runs/")[1].split("?")[0]
    fork = wb.get_workflow(new)
    assert fork.forked_from == mine and fork.attributes == {"customer": "ui-c-17"}
    assert fork.activity("extract").reused_from == got.activity_exec_id
    shown = http(con.url(f"/runs/{new}")).body
    assert "Forked from" in shown and f'href="/runs/{mine}"' in shown
    assert "customer=ui-c-17" in shown
