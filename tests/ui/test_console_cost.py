"""Issue 30: the runs page cost ~4,490 Queries per load (definitions x states x shards
for its counts) and again every 4 s. Now, through the store's request meter: a page of
runs costs a bounded number of requests however many definitions exist, the counts are
``len(STATE_ORDER) x STATE_SHARDS`` Queries once per COUNTS_TTL (not per refresh, not
per tab), and a refresh that finds nothing changed waits twice as long next time.
The figures are the ones docs/console.md states."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator

import pytest
from ui_support import Console, console

from whimbrel import ActivityDefinition, LauncherSpec, RetryPolicy, Whimbrel, WorkflowDefinition
from whimbrel.store import specs
from whimbrel.testing import fresh_table_prefix
from whimbrel.ui import app, present

NAMES = 40
#: docs/console.md, "What it costs": a load of /runs (the page of 50 runs, the names of
#: the workflow filter) and a refresh of its list.
PAGE_BUDGET = 70
#: The counts: one Query per state and write shard in their first round, and a few for
#: a state whose shards hold more than their share of the cap.
COUNTS_BUDGET = len(present.STATE_ORDER) * specs.STATE_SHARDS + 2 * specs.STATE_SHARDS


def get(con: Console, path: str) -> str:
    with urllib.request.urlopen(con.url(path), timeout=60) as resp:
        assert resp.status == 200
        return str(resp.read().decode())


def requests(wb: Whimbrel) -> int:
    return sum(wb.meter.calls.values())


@pytest.fixture(scope="module")
def con(module_ddb_endpoint: str) -> Iterator[Console]:
    wb = Whimbrel(endpoint_url=module_ddb_endpoint, table_prefix=fresh_table_prefix())
    wb.create_tables()
    for i in range(NAMES):
        wb.register_workflow(WorkflowDefinition(f"cost_{i:03d}", (ActivityDefinition(
            "w", launcher=LauncherSpec.external(), retry=RetryPolicy(max_attempts=1)),)))
    for i in range(80):
        wb.start_workflow(f"cost_{i % NAMES:03d}")
    with console(wb, refresh_seconds=1, counts_ttl=app.counts.COUNTS_TTL) as c:
        yield c
    wb.close()
    wb.store.delete_tables()


def test_a_load_costs_a_bounded_number_of_requests(con: Console) -> None:
    wb = con.wb
    wb.meter.reset()
    page = get(con, "/runs")
    assert len(re.findall(r'data-run="', page)) == 50
    loaded = requests(wb)
    assert loaded <= PAGE_BUDGET, dict(wb.meter.calls)
    assert "Scan" not in wb.meter.calls, dict(wb.meter.calls)
    wb.meter.reset()
    counts = get(con, "/runs/counts")
    assert re.search(r'<span class="n">80</span><span class="l">all states', counts)
    counted = requests(wb)
    assert counted <= COUNTS_BUDGET, dict(wb.meter.calls)
    # A second tab, or the next refresh, within COUNTS_TTL: no request at all.
    wb.meter.reset()
    assert "80</span>" in get(con, "/runs/counts")
    assert requests(wb) == 0, dict(wb.meter.calls)
    print(f"\nrequests: page {loaded}, counts {counted}")


def test_a_refresh_that_finds_nothing_new_backs_off(con: Console) -> None:
    wb = con.wb
    page = get(con, "/runs/live")
    delays = []
    for _ in range(4):
        url = re.search(r'hx-get="(/runs/live\?[^"]+)"', page)
        assert url is not None
        wb.meter.reset()
        page = get(con, url.group(1).replace("&amp;", "&"))
        assert requests(wb) <= PAGE_BUDGET, dict(wb.meter.calls)
        delays.append(delay_ms(page))
    assert delays == [4000, 8000, 16000, 32000]
    assert delays[-1] <= app.MAX_REFRESH_SECONDS * 1000
    # Something changes: the next refresh comes at the base pace again.
    wb.start_workflow("cost_000")
    url = re.search(r'hx-get="(/runs/live\?[^"]+)"', page)
    assert url is not None
    assert delay_ms(get(con, url.group(1).replace("&amp;", "&"))) == 2000


def delay_ms(page: str) -> int:
    found = re.search(r'data-delay-ms="(\d+)"', page)
    assert found is not None
    return int(found.group(1))
