"""``Whimbrel.list_workflows`` / ``count_workflows`` on DynamoDB Local (issue 15 §2).

500 runs of three workflows in four states, spread over ten days by the injected clock
(two runs share each creation time, so page boundaries fall inside ties), are listed
page by page with every filter combination and compared with the truth read back item
by item. The cost test counts the index entries and items each page reads.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from whimbrel import (
    ActivityDefinition,
    InvalidInput,
    LauncherSpec,
    Whimbrel,
    WorkflowDefinition,
    WorkflowExec,
    WorkflowPage,
    WorkflowState,
)
from whimbrel.client.query import DEFAULT_LOOKBACK_DAYS, first_batch
from whimbrel.store import specs
from whimbrel.store.transport import refuse_scans
from whimbrel.testing import fresh_table_prefix

W = WorkflowState
NAMES = ("alpha", "beta", "gamma")
RUNS = 500
DAY = 86400.0
T0 = 1_790_000_000.0  # 2026-09-21
STEP = 10 * DAY / (RUNS // 2)  # two runs per creation time, over ten days
NOW = T0 + 11 * DAY


def one_step(name: str) -> WorkflowDefinition:
    return WorkflowDefinition(name, (
        ActivityDefinition("work", launcher=LauncherSpec.external()),))


class ThreadClock:
    """Each thread may pin its own time (runs are created in parallel, each at its own
    created_epoch); other threads see ``now``."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.local = threading.local()

    def __call__(self) -> float:
        return float(getattr(self.local, "at", self.now))


@dataclass(frozen=True)
class Run:
    wx: str
    name: str
    state: WorkflowState
    created: float


def drive(wb: Whimbrel, wx: str, target: WorkflowState) -> None:
    """Move a fresh run (its external activity READY) to ``target``."""
    if target is W.CANCELLED:
        wb.cancel_workflow(wx)
        return
    if target is W.RUNNING:
        return
    aeid = wb.get_workflow(wx).activity("work").activity_exec_id
    wb.transition_activity(aeid, "RUNNING")
    wb.transition_activity(aeid, "COMPLETED" if target is W.COMPLETED else "FAILED",
                           error="no" if target is W.FAILED else None)


def populate(wb: Whimbrel, clock: ThreadClock, runs: int, names: tuple[str, ...],
             start: float, step: float) -> list[Run]:
    targets = (W.CANCELLED, W.FAILED, W.COMPLETED, W.RUNNING, W.RUNNING)

    def one(i: int) -> Run:
        clock.local.at = start + (i // 2) * step
        try:
            name = names[i % len(names)]
            wx = wb.start_workflow(name, {"i": i}, request_id=f"{name}-{i}")
            drive(wb, wx, targets[i % len(targets)])
        finally:
            del clock.local.at
        wf = wb.get_workflow(wx)
        assert wf.state is targets[i % len(targets)]
        return Run(wx, name, wf.state, wf.created_epoch)

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, range(runs)))


def newest_first(runs: list[Run]) -> list[str]:
    return [r.wx for r in sorted(runs, key=lambda r: (-r.created, r.wx))]


def walk(wb: Whimbrel, limit: int, **filters: Any) -> list[WorkflowExec]:
    out: list[WorkflowExec] = []
    cursor = None
    for _ in range(2000):
        page = wb.list_workflows(limit=limit, cursor=cursor, **filters)
        assert len(page.items) <= limit
        out.extend(page.items)
        cursor = page.cursor
        if cursor is None:
            return out
    raise AssertionError("paging never ended")


@pytest.fixture(scope="module")
def world(module_ddb_endpoint: str) -> Iterator[tuple[Whimbrel, list[Run]]]:
    clock = ThreadClock(NOW)
    wb = Whimbrel(endpoint_url=module_ddb_endpoint, table_prefix=fresh_table_prefix(), clock=clock)
    wb.create_tables()
    for name in NAMES:
        wb.register_workflow(one_step(name))
    runs = populate(wb, clock, RUNS, NAMES, T0, STEP)
    yield wb, runs
    wb.close()
    wb.store.delete_tables()


@pytest.fixture(autouse=True)
def no_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_scans(monkeypatch, "listing runs must never Scan")


def test_every_run_exactly_once_newest_first(world: tuple[Whimbrel, list[Run]]) -> None:
    wb, runs = world
    assert len({r.created for r in runs}) == RUNS // 2  # ties on every creation time
    listed = walk(wb, 37)
    assert [w.workflow_exec_id for w in listed] == newest_first(runs)
    truth = {r.wx: r for r in runs}
    for wf in listed:
        assert (wf.workflow_name, wf.state) == (truth[wf.workflow_exec_id].name,
                                               truth[wf.workflow_exec_id].state)
        assert wf.activities == ()
    # Page size 1 puts every boundary between two runs of the same creation time (over
    # a day of beta's runs: each page of a name reads every shard of every state).
    since, until = T0 + 3 * DAY, T0 + 4 * DAY
    beta = [r for r in runs if r.name == "beta" and since <= r.created < until]
    assert len(beta) > 10
    assert [w.workflow_exec_id for w in walk(wb, 1, name="beta", since=since, until=until)
            ] == newest_first(beta)


WINDOW = (T0 + 2 * DAY + 1234.5, T0 + 6 * DAY)


@pytest.mark.parametrize("window", [None, WINDOW], ids=["all-time", "window"])
@pytest.mark.parametrize("state", [None, W.RUNNING, (W.RUNNING, W.FAILED)],
                         ids=["any-state", "running", "running-or-failed"])
@pytest.mark.parametrize("name", [None, "beta"], ids=["any-name", "beta"])
def test_each_filter_combination(world: tuple[Whimbrel, list[Run]], name: str | None,
                                 state: Any, window: tuple[float, float] | None) -> None:
    wb, runs = world
    states = {state} if isinstance(state, W) else set(state or ())
    since, until = window or (None, None)
    want = [r for r in runs
            if (name is None or r.name == name) and (not states or r.state in states)
            and (since is None or r.created >= since)
            and (until is None or r.created < until)]
    assert want
    got = walk(wb, 45, name=name, state=state, since=since, until=until)
    assert [w.workflow_exec_id for w in got] == newest_first(want)
    assert wb.count_workflows(name=name, state=state, since=since, until=until) == len(want)


def test_times_as_datetimes_and_state_names(world: tuple[Whimbrel, list[Run]]) -> None:
    wb, runs = world
    since, until = (datetime.fromtimestamp(t, UTC) for t in WINDOW)
    want = [r for r in runs if WINDOW[0] <= r.created < WINDOW[1] and r.state is W.FAILED]
    got = walk(wb, 100, state=["failed"], since=since, until=until)
    assert [w.workflow_exec_id for w in got] == newest_first(want)


def test_ages_keep_their_window_across_pages(world: tuple[Whimbrel, list[Run]]) -> None:
    wb, runs = world
    clock = wb.clock
    assert isinstance(clock, ThreadClock)
    want = [r for r in runs if r.created >= NOW - 9 * DAY and r.state is W.RUNNING]
    first = wb.list_workflows(since="9d", state="RUNNING", limit=25)
    try:
        clock.now = NOW + 5 * DAY  # "9d" from this now would cut most runs off
        rest = walk_from(wb, first.cursor, since="9d", state="RUNNING", limit=25)
    finally:
        clock.now = NOW
    got = [w.workflow_exec_id for w in (*first.items, *rest)]
    assert got == newest_first(want)
    iso = datetime.fromtimestamp(WINDOW[1], UTC).isoformat()
    assert [w.workflow_exec_id for w in walk(wb, 100, state="FAILED", until=iso,
                                             since=WINDOW[0])] == newest_first(
        [r for r in runs if WINDOW[0] <= r.created < WINDOW[1] and r.state is W.FAILED])


def test_default_lookback_without_filters(world: tuple[Whimbrel, list[Run]]) -> None:
    wb, runs = world
    # 25 days later, the 30-day walk back from `until` still reaches the oldest runs;
    # 35 days later it sees only what was created in its window.
    late = T0 + 35 * DAY
    horizon = datetime.fromtimestamp(late, UTC).replace(hour=0, minute=0, second=0,
                                                        microsecond=0).timestamp()
    horizon -= (DEFAULT_LOOKBACK_DAYS - 1) * DAY
    want = [r for r in runs if r.created >= horizon]
    assert 0 < len(want) < RUNS
    assert [w.workflow_exec_id for w in walk(wb, 200, until=late)] == newest_first(want)
    assert len(walk(wb, 500, until=T0 + 25 * DAY)) == RUNS
    # A name or a state needs no day walk: no lookback limit.
    assert len(walk(wb, 500, name="alpha", until=late)) == len(
        [r for r in runs if r.name == "alpha"])


def test_a_long_sparse_window_pages_at_a_bounded_cost(
        world: tuple[Whimbrel, list[Run]]) -> None:
    wb, runs = world
    since = T0 - 200 * DAY  # 190 empty days below the runs, one more above
    pages: list[WorkflowPage] = []
    cursor = None
    while True:
        wb.meter.reset()
        page = wb.list_workflows(since=since, limit=50, cursor=cursor)
        # One Query per write shard of by_day, whatever the window spans (and one more
        # per shard that holds more than a page's worth).
        assert wb.meter.calls["Query"] <= 2 * specs.BY_DAY_SHARDS
        pages.append(page)
        cursor = page.cursor
        if cursor is None:
            break
    listed = [w.workflow_exec_id for p in pages for w in p.items]
    assert listed == newest_first(runs)
    assert len(pages) == -(-len(runs) // 50)  # empty days cost no page
    # Counting reads every shard once, however many days the window spans.
    wb.meter.reset()
    assert wb.count_workflows(since=since) == len(runs)
    assert wb.meter.calls["Query"] <= 2 * specs.BY_DAY_SHARDS
    assert wb.count_workflows(since=since, state=W.FAILED) == sum(
        r.state is W.FAILED for r in runs)


def test_run_entries_spread_over_the_write_shards(world: tuple[Whimbrel, list[Run]]) -> None:
    wb, runs = world
    table = wb.store.tables.workflow_table
    keys = [wb.store.botocore.get_item(TableName=table, Key={"workflow_exec_id": {"S": r.wx}})
            ["Item"] for r in runs[:100]]
    days = {k["created_day"]["S"] for k in keys}
    assert days <= {specs.by_day_key(k) for k in range(specs.BY_DAY_SHARDS)}
    assert len(days) > specs.BY_DAY_SHARDS // 2  # spread, not one key
    for item in keys:
        name, state, shard = item["name_state"]["S"].split("#")
        assert (name, state) == (item["workflow_name"]["S"], item["state"]["S"])
        assert 0 <= int(shard) < specs.NAME_STATE_SHARDS


def test_a_forged_cursor_cannot_widen_the_walk(world: tuple[Whimbrel, list[Run]]) -> None:
    wb, _ = world
    page = wb.list_workflows(limit=5)
    assert page.cursor is not None
    body = json.loads(base64.urlsafe_b64decode(page.cursor + "=" * (-len(page.cursor) % 4)))
    for forged in ({**body, "f": 0.0}, {**body, "f": None}, {**body, "e": body["e"] + 40 * DAY}):
        with pytest.raises(InvalidInput, match="not a cursor") as err:
            wb.list_workflows(limit=5, cursor=_cursor(forged))
        assert err.value.field == "cursor"
    beta = wb.list_workflows(name="beta", since=T0, limit=5)
    assert beta.cursor is not None
    body = json.loads(base64.urlsafe_b64decode(beta.cursor + "=" * (-len(beta.cursor) % 4)))
    with pytest.raises(InvalidInput, match="not a cursor"):
        wb.list_workflows(name="beta", since=T0, limit=5,
                          cursor=_cursor({**body, "e": T0 - DAY}))


def test_cost_is_proportional_to_the_page(world: tuple[Whimbrel, list[Run]]) -> None:
    wb, runs = world
    meter = wb.meter
    shards = specs.NAME_STATE_SHARDS
    assert shards == specs.BY_DAY_SHARDS

    def cost(limit: int, **filters: Any) -> tuple[int, int, int]:
        meter.reset()
        page = wb.list_workflows(limit=limit, **filters)
        assert len(page.items) == limit and page.cursor
        return meter.calls["Query"], meter.items_read["Query"], meter.items_read["BatchGetItem"]

    def bounded(partitions: int, limit: int, queries: int, entries: int) -> bool:
        """One Query per partition (its write shards, read at once), a few more where the
        merge came back for more; each first Query asks for a share of the page (or the
        few entries the cheapest Query holds anyway), not for the whole page."""
        first = first_batch(limit + 1, partitions)
        return (partitions <= queries <= partitions + 4
                and entries <= partitions * first + 2 * (limit + 1))

    matching = [r for r in runs if r.name == "beta" and r.state in (W.RUNNING, W.FAILED)]
    assert len(matching) > 100
    for limit in (4, 20, 60):
        # name + two states: the write shards of each state.
        queries, entries, items = cost(limit, name="beta", state=[W.RUNNING, W.FAILED])
        assert bounded(2 * shards, limit, queries, entries) and items == limit
        # two states: the by_state shards of each, whatever the names (issue 29).
        queries, entries, items = cost(limit, state=[W.RUNNING, W.FAILED])
        assert bounded(2 * specs.STATE_SHARDS, limit, queries, entries)
        assert items == limit
        # a name alone: the shards of every state the contract has.
        queries, entries, items = cost(limit, name="gamma")
        assert bounded(len(W) * shards, limit, queries, entries) and items == limit
        # No filter: the shards of by_day, whatever the days the window spans.
        newest = max(r.created for r in runs)
        queries, entries, items = cost(limit, until=newest - newest % DAY - 1)
        assert bounded(shards, limit, queries, entries) and items == limit
        queries, entries, items = cost(limit)
        assert bounded(shards, limit, queries, entries) and items == limit
    # Asking every shard for the whole page would read 32 times the page.
    assert first_batch(1001, shards) == 2 * 32 + 1
    # A page deep into the listing costs what the first one did.
    first = wb.list_workflows(name="beta", state=[W.RUNNING, W.FAILED], limit=20)
    cursor = first.cursor
    for _ in range(3):
        cursor = wb.list_workflows(name="beta", state=[W.RUNNING, W.FAILED], limit=20,
                                   cursor=cursor).cursor
    meter.reset()
    wb.list_workflows(name="beta", state=[W.RUNNING, W.FAILED], limit=20, cursor=cursor)
    assert bounded(2 * shards, 20, meter.calls["Query"], meter.items_read["Query"])
    assert meter.calls.get("Scan", 0) == 0
    # Counting reads index keys only, about `cap` of them across the partitions (each
    # round asks every partition left for a share of what is missing).
    meter.reset()
    assert wb.count_workflows(state=W.RUNNING, cap=50) == 50
    partitions = len(NAMES) * shards
    assert meter.items_read["Query"] <= 50 + len(NAMES) + partitions
    assert "BatchGetItem" not in meter.calls


def test_state_change_between_pages(ddb_endpoint: str, table_prefix: str) -> None:
    clock = ThreadClock(NOW)
    with Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix, clock=clock) as wb:
        wb.create_tables()
        try:
            state_change_between_pages(wb, clock)
        finally:
            wb.store.delete_tables()


def state_change_between_pages(wb: Whimbrel, clock: ThreadClock) -> None:
    wb.register_workflow(one_step("delta"))
    runs = populate(wb, clock, 60, ("delta",), T0, 600.0)
    running = [r for r in runs if r.state is W.RUNNING]
    wanted = (W.RUNNING, W.FAILED)
    first = wb.list_workflows(name="delta", state=wanted, limit=10)
    seen = [w.workflow_exec_id for w in first.items]
    later = [r for r in sorted(running, key=lambda r: (-r.created, r.wx)) if r.wx not in seen]
    # Between pages: a run already shown fails, a run still to come fails (still
    # wanted), and another still to come completes (no longer wanted).
    shown_then_failed = next(r for r in running if r.wx in seen)
    moved, gone = later[0], later[1]
    drive_existing(wb, shown_then_failed.wx, W.FAILED)
    drive_existing(wb, moved.wx, W.FAILED)
    drive_existing(wb, gone.wx, W.COMPLETED)
    rest = walk_from(wb, first.cursor, name="delta", state=wanted, limit=10)
    ids = seen + [w.workflow_exec_id for w in rest]
    assert len(ids) == len(set(ids))  # nothing twice
    assert moved.wx in ids and gone.wx not in ids
    assert ids.count(shown_then_failed.wx) == 1
    expected = {r.wx for r in runs if r.state in wanted} - {gone.wx}
    assert set(ids) == expected
    # The same across every registered name.
    assert {w.workflow_exec_id for w in walk(wb, 7, state=W.FAILED)} == (
        {r.wx for r in runs if r.state is W.FAILED} | {moved.wx, shown_then_failed.wx})


def drive_existing(wb: Whimbrel, wx: str, target: WorkflowState) -> None:
    drive(wb, wx, target)
    assert wb.get_workflow(wx).state is target


def walk_from(wb: Whimbrel, cursor: str | None, **kwargs: Any) -> list[WorkflowExec]:
    out: list[WorkflowExec] = []
    while cursor is not None:
        page = wb.list_workflows(cursor=cursor, **kwargs)
        out.extend(page.items)
        cursor = page.cursor
    return out


def _cursor(body: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(body).encode()).decode()


@pytest.mark.parametrize(("kwargs", "field", "words"), [
    ({"limit": 0}, "limit", "from 1 to 1000"),
    ({"limit": 1001}, "limit", "from 1 to 1000"),
    ({"limit": "10"}, "limit", "from 1 to 1000"),
    ({"limit": True}, "limit", "from 1 to 1000"),
    ({"state": "EXPLODED"}, "state", "unknown workflow state 'EXPLODED'"),
    ({"state": []}, "state", "at least one state"),
    ({"state": 42}, "state", "WorkflowState"),
    ({"state": [W.RUNNING, None]}, "state", "unknown workflow state None"),
    ({"name": "no spaces allowed"}, "name", "must match"),
    ({"name": ""}, "name", "must match"),
    ({"since": "yesterday"}, "since", "epoch seconds"),
    ({"until": float("nan")}, "until", "epoch seconds"),
    ({"since": float("inf")}, "since", "finite"),
    ({"since": datetime(2026, 1, 1)}, "since", "timezone-aware"),
    ({"since": T0 + 10, "until": T0}, "since", "after until"),
    ({"cursor": "not a cursor!"}, "cursor", "not a cursor"),
    ({"cursor": ""}, "cursor", "not a cursor"),
    ({"cursor": 17}, "cursor", "not a cursor"),
    ({"cursor": _cursor({"v": 1, "e": "soon", "x": "a", "f": None, "q": ""})}, "cursor",
     "not a cursor"),
    ({"cursor": _cursor({"v": 1, "e": T0, "x": "a", "f": None, "t": T0, "q": "0" * 16})},
     "cursor", "other filters"),
    ({"cursor": base64.urlsafe_b64encode(b"[1, 2]").decode()}, "cursor", "not a cursor"),
])
def test_bad_arguments(world: tuple[Whimbrel, list[Run]], kwargs: dict[str, Any],
                       field: str, words: str) -> None:
    wb, _ = world
    with pytest.raises(InvalidInput, match=words) as err:
        wb.list_workflows(**kwargs)
    assert err.value.field == field


def test_cursor_only_fits_its_own_filters(world: tuple[Whimbrel, list[Run]]) -> None:
    wb, _ = world
    page = wb.list_workflows(name="alpha", limit=3)
    assert page.cursor is not None
    with pytest.raises(InvalidInput, match="other filters") as err:
        wb.list_workflows(name="beta", limit=3, cursor=page.cursor)
    assert err.value.field == "cursor"
    with pytest.raises(InvalidInput, match="from 1 to 1000") as cap_err:
        wb.count_workflows(cap=0)
    assert cap_err.value.field == "cap"
