"""Issue 29: the console's "Fork from here" on a step of a code run (its attempts are the
run's steps, ``name#k``) starts the fork from that step and opens it; over plain HTTP."""

from __future__ import annotations

from urllib.parse import quote

import wb_fork_code as fork
from test_console_http import CSRF, cookie, http
from ui_support import console

from whimbrel import Whimbrel
from whimbrel.contract.ids import activity_exec_id


def test_fork_from_a_step_of_a_code_run(ddb_endpoint: str, table_prefix: str) -> None:
    wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix)
    wb.create_tables()
    try:
        wb.register_workflow(fork.loop)
        src = wb.start_workflow("fork_loop", {"start": 0, "steps": 3})
        assert wb.wait(src, timeout=30).state.value == "COMPLETED"
        step = activity_exec_id(src, "add#2", 1)
        with console(wb) as con:
            page = http(con.url(f"/runs/{src}")).body
            assert f"/actions/fork?target={quote(step, safe='')}" in page, page
            confirm = http(con.url(f"/actions/fork?target={quote(step, safe='')}"))
            assert confirm.status == 200 and "Fork from here" in confirm.body
            same = {"Cookie": cookie(con), "Origin": con.server.url}
            done = http(con.url("/actions/fork"), method="POST",
                        form={"target": step, "csrf": CSRF}, headers=same)
            assert done.status == 303, done
            new = done.headers["Location"].split("/runs/")[1].split("?")[0]
            run = wb.wait(new, timeout=30)
            assert run.state.value == "COMPLETED" and run.forked_from == src, run
            assert [a.activity_name for a in run.activities if a.reused_from] == ["add#1"]
            assert [fork.calls(new, f"add#{k}") for k in (1, 2, 3)] == [0, 1, 1]
            shown = http(con.url(f"/runs/{new}")).body
            assert "Forked from" in shown and f'href="/runs/{src}"' in shown
    finally:
        wb.close()
        wb.store.delete_tables()
