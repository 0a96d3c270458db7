"""Code runs where the code is (issue 26; issue 31's "a process that exits right after
its own run"): a python activity runs only in a worker for it; every other process that
advances its run leaves it claimable and never fails it for want of the code.

Real processes on DynamoDB Local: the starter and workers have the activity module
(``wc_orders``) on their path; this test process, ``whimbrel dev`` (a LocalRuntime here)
and the one-shot commands run from a folder without it do not.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from where_code_support import Place, said

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.errors import InvalidInput
from whimbrel.launch.python import WorkerScope
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import wait_until

SHIP = LauncherSpec.python("wc_orders:ship")
A = ActivityState


@pytest.fixture
def place(tmp_path: Path, ddb_endpoint: str, table_prefix: str) -> Place:
    return Place.make(tmp_path, ddb_endpoint, table_prefix)


@pytest.fixture
def bystander(ddb_endpoint: str, table_prefix: str) -> Iterator[Whimbrel]:
    """A client of this process that registers and starts nothing python: no worker."""
    client = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix)
    client.create_tables()
    yield client
    client.close()
    client.store.delete_tables()


def until(what: Callable[[], Any], seconds: float = 60.0) -> Any:
    """``wait_until`` with this file's patience (processes start Python on 2 cores)."""
    return wait_until(what, timeout=seconds, interval=0.05, message=f"not within {seconds} s")


@contextmanager
def sweeping(wb: Whimbrel, also: Callable[[], object] | None = None) -> Iterator[None]:
    """``wb`` sweeps every 0.2 s meanwhile, as the scheduled heartbeat listener does,
    and calls ``also`` each time."""
    stop = threading.Event()

    def sweep() -> None:
        while not stop.wait(0.2):
            wb.sweep()
            if also is not None:
                also()

    thread = threading.Thread(target=sweep, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)


@contextmanager
def logged() -> Iterator[list[str]]:
    """The warnings whimbrel logs meanwhile (a handler on its own logger, at WARNING: a
    Powertools logger of an earlier test may have stopped it propagating to pytest's,
    or raised its level)."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler, logger = Keep(logging.WARNING), logging.getLogger("whimbrel")
    level = logger.level  # an earlier test's Lambda handlers may have raised it
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def attempts(wb: Whimbrel, wx: str) -> list[Any]:
    return list(wb.get_workflow(wx).activities)


def nothing_failed_or_stuck(wb: Whimbrel, wxs: list[str]) -> None:
    for wx in wxs:
        for act in attempts(wb, wx):
            assert act.state is A.COMPLETED, (wx, act.activity_exec_id, act.state, act.error)


def test_a_retry_launched_by_dev_that_cannot_import_it_runs_in_the_starting_process(
        place: Place, bystander: Whimbrel) -> None:
    """Attempt 2 comes after a back-off: ``whimbrel dev``'s sweeper launches it. Dev
    cannot import ``wc_orders``: it leaves the attempt claimable, and the starter, alive
    and waiting, claims and runs it (before: FAILED "cannot import", the run FAILED)."""
    defn = WorkflowDefinition("wc_retry", (Act("ship", launcher=SHIP, retry=RetryPolicy(
        max_attempts=2, initial_interval_seconds=1.0, jitter=0.0)),))
    with LocalRuntime(place.endpoint, place.prefix, heartbeat_rate_seconds=0.2,
                      lambda_log_level="WARNING") as dev:
        assert not dev.client.worker_scope.covers("wc_orders:ship")  # no code here
        starter = place.spawn("start-and-wait", defn.to_json(),
                              json.dumps({"fail_attempts": 1}), "close")
        started, ended = said(starter), said(starter)
        assert starter.wait(60) == 0
    assert ended["state"] == "COMPLETED"
    first, second = sorted(attempts(bystander, started["wx"]), key=lambda a: a.attempt)
    assert (first.state, second.state) == (A.FAILED, A.COMPLETED)
    assert place.ran_in()[second.activity_exec_id.replace("/", "_")] == started["pid"]
    # Dev moved it (its sweeper's visit), then the starter claimed it: never FAILED there.
    readied_by = [h.by for h in second.history if h.state == "READY"]
    assert readied_by and readied_by[0] != "client"
    assert "cannot import" not in (second.error or "")


def test_the_step_after_approve_from_another_directory_runs_in_the_starting_process(
        place: Place, bystander: Whimbrel, tmp_path: Path) -> None:
    defn = WorkflowDefinition("wc_approve", (
        Act("review", launcher=LauncherSpec.approval()),
        Act("ship", depends_on=("review",), launcher=SHIP)))
    starter = place.spawn("start-and-wait", defn.to_json(), "{}", "close")
    started = said(starter)
    wx = started["wx"]
    review = until(lambda: next((a for a in attempts(bystander, wx)
                                 if a.activity_name == "review" and a.state is A.READY), None))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = place.cli("approve", review.activity_exec_id, "--by", "alice", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    ended = said(starter)
    assert starter.wait(60) == 0
    assert ended["state"] == "COMPLETED"
    ship = next(a for a in attempts(bystander, wx) if a.activity_name == "ship")
    assert ship.state is A.COMPLETED and ship.attempt == 1
    assert place.ran_in()[ship.activity_exec_id.replace("/", "_")] == started["pid"]


@pytest.mark.parametrize("command", ["pools set", "cancel", "sweep"])
def test_a_one_shot_command_freeing_a_slot_neither_runs_nor_fails_the_waiting_work(
        place: Place, bystander: Whimbrel, tmp_path: Path, command: str) -> None:
    """The pool's only slot is held by an external attempt nobody claims; six python
    runs of a worker process wait for it. A one-shot command frees the slot: it admits
    the waiters but runs none (it has no code) and fails none (before: 6 of 6 FAILED,
    exit 0); the worker runs all six."""
    bystander.set_pool("wc_pool", slots=1, per_second=None)
    bystander.register_workflow(WorkflowDefinition("wc_hold", (Act(
        "hold", pool="wc_pool", schedule_to_start_seconds=1.0 if command == "sweep" else None),)))
    holder = bystander.start_workflow("wc_hold")
    until(lambda: bystander.store.get_activity(attempts(bystander, holder)[0].activity_exec_id)
          .pool_slot)
    pooled = WorkflowDefinition("wc_pooled", (Act("ship", launcher=SHIP, pool="wc_pool"),))
    waiter = place.spawn("start-many-and-wait", pooled.to_json(), "6", "{}")
    wxs = said(waiter)["wxs"]

    def all_waiting() -> bool:
        acts = [a for wx in wxs for a in attempts(bystander, wx)]
        return len(acts) == 6 and all(
            bystander.store.get_activity(a.activity_exec_id).pool_wait for a in acts)
    until(all_waiting)
    here = tmp_path / "ops"
    here.mkdir()
    if command == "pools set":
        done = place.cli("pools", "set", "wc_pool", "--slots", "7", cwd=here)
    elif command == "cancel":
        done = place.cli("cancel", holder, cwd=here)
    else:
        until(lambda: time.time() > attempts(bystander, holder)[0].created_epoch + 1.2)
        done = place.cli("sweep", cwd=here)
    assert done.returncode == 0, done.stderr
    # The command ran none and failed none: what it admitted waits for the worker.
    for x in (x for wx in wxs for x in attempts(bystander, wx)):
        assert x.state is not A.FAILED and place.ran_in().get(
            x.activity_exec_id.replace("/", "_")) in (None, waiter.pid), x
    # The worker process sees a raised limit only when its cached pool settings expire
    # (within 5 s), and no release may come then to admit the rest: an operator's
    # repeat stands in for a re-check of waiters that pools do not make (a separate
    # finding). The repeat is one more one-shot caller: it runs nothing either.
    again = (lambda: bystander.set_pool("wc_pool", slots=7, per_second=None)) \
        if command == "pools set" else None
    with sweeping(bystander, again):  # as the scheduled one would: not a worker either
        states = said(waiter)["states"]
    assert waiter.wait(60) == 0
    assert states == ["COMPLETED"] * 6
    nothing_failed_or_stuck(bystander, wxs)
    ran = place.ran_in()
    assert {ran[a.activity_exec_id.replace("/", "_")] for wx in wxs
            for a in attempts(bystander, wx)} == {waiter.pid}


@pytest.mark.parametrize("limit", ["pool", "max_running"])
def test_a_script_that_exits_after_its_run_takes_no_other_run_with_it(
        place: Place, bystander: Whimbrel, limit: str) -> None:
    """Script A's run holds the only slot (a pool's, or ``max_running=1``); process B's
    run waits. A's run ends, which admits B's (A registered the workflow: a worker for
    it), and A exits at once without closing. B's run still completes, and nothing is
    left RUNNING (before: RUNNING for good, holding the slot)."""
    if limit == "pool":
        bystander.set_pool("wc_one", slots=1, per_second=None)
        defn = WorkflowDefinition("wc_exit", (Act("ship", launcher=SHIP, pool="wc_one"),))
    else:
        defn = WorkflowDefinition("wc_exit", (Act("ship", launcher=SHIP),), max_running=1)
    gate, later = place.records / "gate", place.records / "later"
    a = place.spawn("start-and-wait", defn.to_json(), json.dumps({"gate": str(gate)}), "exit")
    a_wx = said(a)["wx"]
    until(lambda: any(a.state is A.RUNNING for a in attempts(bystander, a_wx)))
    # B's step, wherever it runs, holds until A's main thread has ended.
    b = place.spawn("start-and-wait", defn.to_json(), json.dumps({"gate": str(later)}),
                    "close")
    b_wx = said(b)["wx"]
    until(lambda: bystander.get_workflow(b_wx).state is WorkflowState.QUEUED
          if limit == "max_running" else any(
              bystander.store.get_activity(x.activity_exec_id).pool_wait
              for x in attempts(bystander, b_wx)))
    gate.write_text("go")
    assert said(a)["state"] == "COMPLETED"
    assert said(a) == {"exiting": True}
    later.write_text("go")
    assert a.wait(60) == 0
    assert said(b)["state"] == "COMPLETED", [
        (x.activity_exec_id, x.state, x.error, place.ran_in().get(
            x.activity_exec_id.replace("/", "_")), a.pid, b.pid)
        for x in attempts(bystander, b_wx)]
    assert b.wait(60) == 0
    nothing_failed_or_stuck(bystander, [a_wx, b_wx])


def test_run_worker_completes_the_run_of_a_script_that_left(
        place: Place, bystander: Whimbrel) -> None:
    """A script starts a run and exits; its python step comes after a timer that a
    bystander's sweep fires (no worker: it leaves the step claimable); a separate
    ``run_worker`` process for ``wc_orders`` claims and runs it, and stops on SIGTERM."""
    bystander.register_workflow(WorkflowDefinition("wc_later", (
        Act("pause", launcher=LauncherSpec.timer(0.5)),
        Act("ship", depends_on=("pause",), launcher=SHIP))))
    script = place.spawn("start-and-leave", "wc_later", "{}", with_code=False)
    wx = said(script)["wx"]
    assert script.wait(60) == 0
    worker = place.spawn("worker", "wc_orders")
    assert said(worker)["worker"] == "ready"
    until(lambda: time.time() > bystander.get_workflow(wx).created_epoch + 0.6)
    until(lambda: bystander.sweep().timers_fired or
          bystander.get_workflow(wx).state is not WorkflowState.RUNNING or
          any(x.activity_name == "ship" for x in attempts(bystander, wx)))
    done = until(lambda: (w := bystander.get_workflow(wx)).state.is_terminal and w)
    assert done.state is WorkflowState.COMPLETED
    ship = next(x for x in done.activities if x.activity_name == "ship")
    assert place.ran_in()[ship.activity_exec_id.replace("/", "_")] == worker.pid
    worker.send_signal(signal.SIGTERM)
    assert said(worker)["worker"] == "stopped"
    assert worker.wait(30) == 0


def test_closing_a_client_hands_back_what_it_never_started_and_raises_nothing(
        place: Place, bystander: Whimbrel, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client with a caller's executor of one thread (no capacity bound: a client
    with ``max_workers`` leaves what it cannot run claimable, test_worker_capacity.py)
    starts three python steps: one runs (held at a gate), two are RUNNING in the table
    but wait for the thread. Closing hands those two back
    (a next attempt each, claimable), and the one running still records its end after
    the close, with no "cannot schedule new futures" (issue 31). A worker on a thread
    of this process (its own client, stopped by ``stop()``) runs the two."""
    monkeypatch.syspath_prepend(str(place.acts))
    monkeypatch.setitem(sys.modules, "wc_orders", None)  # gone again after the test
    del sys.modules["wc_orders"]
    monkeypatch.setenv("WC_RECORD_DIR", str(place.records))
    gate = place.records / "gate"
    held = {"gate": str(gate)}
    defn = WorkflowDefinition("wc_close", tuple(
        Act(n, launcher=SHIP, input=held) for n in ("a", "b", "c")))
    with logged() as said_meanwhile:
        client = Whimbrel(endpoint_url=place.endpoint, table_prefix=place.prefix,
                          executor=ThreadPoolExecutor(max_workers=1))
        client.register_workflow(defn)
        wx = client.start_workflow("wc_close")
        until(lambda: len(place.ran_in()) == 1)  # the first is in its function
        client.close(wait_seconds=0.2)
        assert client.worker_scope.closed
        handed = [x for x in attempts(bystander, wx) if x.error_type == "HandedBack"]
        assert len(handed) == 2 and all(x.state is A.FAILED and x.attempt == 1 for x in handed)
        worker = Whimbrel(endpoint_url=place.endpoint, table_prefix=place.prefix)
        thread = threading.Thread(target=worker.run_worker, args=(["wc_orders"],),
                                  kwargs={"concurrency": 2})
        thread.start()
        try:
            gate.write_text("go")
            done = until(lambda: (w := bystander.get_workflow(wx)).state.is_terminal and w)
        finally:
            worker.stop()
            thread.join(30)
            worker.close()
        assert not thread.is_alive()
        assert done.state is WorkflowState.COMPLETED
        latest = {x.activity_name: x for x in sorted(done.activities, key=lambda x: x.attempt)}
        assert {n: (x.state, x.attempt) for n, x in latest.items()} == {
            n: (A.COMPLETED, 1 if n not in {h.activity_name for h in handed} else 2)
            for n in "abc"}
    assert client._python.failures == 0
    assert not [m for m in said_meanwhile if "cannot schedule new futures" in m]


@pytest.mark.parametrize(("modules", "concurrency", "says"), [
    ([], None, "at least one module"),
    (["wc_no_such_module"], None, "cannot import module 'wc_no_such_module'"),
    (["json"], 0, "concurrency must be a whole number of at least 1"),
])
def test_run_worker_refuses_bad_arguments_before_it_claims_anything(
        bystander: Whimbrel, modules: list[str], concurrency: int | None, says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        bystander.run_worker(modules=modules, concurrency=concurrency)
    assert not bystander.worker_scope.covers("json:dumps")


def test_a_client_registering_code_it_cannot_import_is_no_worker_for_it(
        bystander: Whimbrel) -> None:
    """A deploy script or a console may register without the code: it says so, and
    leaves the steps to a worker instead of failing them."""
    with logged() as lines:
        bystander.register_workflow(WorkflowDefinition("wc_elsewhere", (
            Act("ship", launcher=SHIP, schedule_to_start_seconds=30),)))
    assert any("this client is no worker for it" in line for line in lines)
    wx = bystander.start_workflow("wc_elsewhere")
    (ship,) = attempts(bystander, wx)
    assert ship.state is A.READY and ship.error is None
    record = bystander.store.get_activity(ship.activity_exec_id)
    assert record.claim_key is not None and record.claim_key.startswith("wc_orders/ship/")
    assert bystander.claim() is None  # an external worker never takes python work


def test_schedule_to_start_still_bounds_the_wait_for_a_worker(bystander: Whimbrel) -> None:
    """With no worker for its module, a python step waits READY; its
    ``schedule_to_start_seconds`` times it out as any unclaimed attempt."""
    with logged():
        bystander.register_workflow(WorkflowDefinition("wc_nobody", (
            Act("ship", launcher=SHIP, schedule_to_start_seconds=1),)))
    wx = bystander.start_workflow("wc_nobody")
    (ship,) = attempts(bystander, wx)
    until(lambda: bystander.sweep(now=ship.created_epoch + 1.5).timed_out)
    (ship,) = attempts(bystander, wx)
    assert ship.state is A.TIMED_OUT
    assert "nobody claimed it within schedule_to_start_seconds" in (ship.error or "")
    assert bystander.get_workflow(wx).state is WorkflowState.FAILED


class _ExitingPool(ThreadPoolExecutor):
    """A pool that refuses its first job as an exiting interpreter's does: the launch
    check passed (the process was a worker), the attempt was moved to RUNNING, and then
    the main thread ended (the scope closes, the pool takes nothing more)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.scope: WorkerScope | None = None
        self.refused = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        if self.scope is not None and not self.refused:
            self.refused += 1
            self.scope.close()
            raise RuntimeError("cannot schedule new futures after interpreter shutdown")
        return super().submit(fn, *args, **kwargs)


def test_a_launch_refused_by_an_exiting_process_is_handed_back_not_failed(
        place: Place, bystander: Whimbrel, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race the exiting script above met under load: its run's end admitted another
    run's step, the script was still a worker when the engine checked, and its pool
    refused the job a moment later. The attempt is handed back (a next attempt at once,
    for a worker), never FAILED with "launch failed" and its run with it."""
    monkeypatch.syspath_prepend(str(place.acts))
    monkeypatch.setitem(sys.modules, "wc_orders", None)  # gone again after the test
    del sys.modules["wc_orders"]
    monkeypatch.setenv("WC_RECORD_DIR", str(place.records))
    pool = _ExitingPool()
    client = Whimbrel(endpoint_url=place.endpoint, table_prefix=place.prefix, executor=pool)
    defn = WorkflowDefinition("wc_exiting", (Act("ship", launcher=SHIP),))
    client.register_workflow(defn)
    pool.scope = client.worker_scope
    wx = client.start_workflow("wc_exiting", {})
    [first] = until(lambda: [x for x in attempts(bystander, wx) if x.state is A.FAILED])
    assert (first.attempt, first.error_type) == (1, "HandedBack"), first
    assert first.error is not None and first.error.startswith("handed back: "), first.error
    worker = Whimbrel(endpoint_url=place.endpoint, table_prefix=place.prefix)
    thread = threading.Thread(target=worker.run_worker, args=(["wc_orders"],))
    thread.start()
    try:
        done = until(lambda: (w := bystander.get_workflow(wx)).state.is_terminal and w)
    finally:
        worker.stop()
        thread.join(30)
        worker.close()
        client.close()
    assert done.state is WorkflowState.COMPLETED, done
    assert pool.refused == 1
