"""What issue 20 found in the console, over plain HTTP: TIMED_OUT runs have a filter and
a count, a store that hangs gets an error page in bounded time, a map says which items
run and which wait and lists its failed items with their errors, and the approval form
says who may decide (and that ``by`` is a label)."""

from __future__ import annotations

import html
import re
import socket
import threading
from collections.abc import Iterator

import pytest
from test_console_http import http
from ui_support import TOKEN, Console, console

from whimbrel import (
    ActivityDefinition,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.testing import StepClock
from whimbrel.ui import ConsoleServer, create_app

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


def _flat(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_timed_out_runs_have_a_filter_and_a_count(
        stepped: tuple[Console, StepClock]) -> None:
    con, clock = stepped
    wb = con.wb
    wb.register_workflow(WorkflowDefinition("bounded", (
        ActivityDefinition("a", launcher=EXT),), timeout_seconds=60))
    wx = wb.start_workflow("bounded")
    wb.sweep(clock.advance(61))
    assert wb.get_workflow(wx).state is WorkflowState.TIMED_OUT
    page = http(con.url("/runs"))
    assert page.status == 200 and wx in page.body
    counts = http(con.url("/runs/counts")).body
    text = _flat(counts)
    assert "1 all states" in text and "0 all states" not in text
    assert "1 timed out" in text
    assert 'href="/runs?state=TIMED_OUT"' in counts
    only = http(con.url("/runs?state=TIMED_OUT"))
    assert only.status == 200 and wx in only.body


@pytest.fixture
def hanging_endpoint() -> Iterator[str]:
    """A TCP server that accepts connections and never answers (a store that hangs)."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def test_a_store_that_hangs_gets_an_error_page_not_a_hung_browser(
        hanging_endpoint: str) -> None:
    wb = Whimbrel(endpoint_url=hanging_endpoint, table_prefix="hang_")
    app = create_app(wb, token=TOKEN, page_timeout=1.0)
    server = ConsoleServer(app, port=0).start()
    try:
        for path in ("/runs", "/runs/live", "/runs/counts", "/pools", "/definitions",
                     "/runs/00000000-0000-0000-0000-000000000000/live"):
            reply = http(f"{server.url}{path}")
            assert reply.status == 504, (path, reply.status)
            assert "DynamoDB did not answer" in reply.body
            assert "did not answer within 1 s" in _flat(reply.body)
    finally:
        server.stop()


def test_a_map_tells_running_from_waiting_items_and_lists_failed_ones(
        stepped: tuple[Console, StepClock]) -> None:
    con, _ = stepped
    wb = con.wb
    wb.register_workflow(WorkflowDefinition("fan", (
        ActivityDefinition("each", launcher=EXT, map_over="$input.xs",
                           retry=RetryPolicy(max_attempts=1)),)))
    wx = wb.start_workflow("fan", {"xs": [1, 2, 3, 4]})
    page = http(con.url(f"/runs/{wx}"))
    # Nothing claimed an item yet: all four wait; none is "running".
    assert "0/4 done, 4 waiting" in page.body and "No failed items" in page.body
    wb.transition_activity(f"{wx}:each#0:1", "RUNNING")
    page = http(con.url(f"/runs/{wx}"))
    assert "0/4 done, 1 running, 3 waiting" in page.body
    # An item fails for good: the map fails, the items not started are cancelled.
    wb.transition_activity(f"{wx}:each#1:1", "RUNNING")
    wb.transition_activity(f"{wx}:each#1:1", "FAILED", error="row 7 <b>is</b> bad",
                           error_type="BadRow")
    page = http(con.url(f"/runs/{wx}"))
    assert "0/4 done, 1 running, 3 failed" in page.body  # each#0 has not reported yet
    failed = re.findall(r'<tr data-item="([^"]+)" data-state="([A-Z_]+)"', page.body)
    assert failed == [("each#1", "FAILED"), ("each#2", "CANCELLED"), ("each#3", "CANCELLED")]
    assert "BadRow: row 7 &lt;b&gt;is&lt;/b&gt; bad" in page.body  # named and escaped


def test_the_approval_form_says_who_may_decide_and_that_by_is_a_label(
        stepped: tuple[Console, StepClock]) -> None:
    con, _ = stepped
    con.wb.register_workflow(WorkflowDefinition("gated", (
        ActivityDefinition("ok", launcher=LauncherSpec.approval(approvers=["ana", "bo"])),
        ActivityDefinition("any", launcher=LauncherSpec.approval()))))
    wx = con.wb.start_workflow("gated")
    named = _flat(http(con.url(f"/actions/approve?target={wx}:ok:1")).body)
    assert "Who may decide: ana bo — the name you give must be one of them." in named
    assert "a label recorded with the decision, not a sign-in" in named
    anyone = _flat(http(con.url(f"/actions/reject?target={wx}:any:1")).body)
    assert "Who may decide: anyone (the definition names no approvers)." in anyone
    assert "not a sign-in" in anyone
    # Other actions have no such paragraph.
    assert "Who may decide" not in _flat(http(con.url(f"/actions/cancel?target={wx}")).body)
