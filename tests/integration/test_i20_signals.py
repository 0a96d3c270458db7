"""Issue 20: ``signal_id`` means one signal, always (decision 7).

The same id with another payload is refused with ``SignalRefused`` at every moment (kept
early, after delivery, under concurrency); the same payload again is an idempotent OK;
every kept signal is delivered to a wait of its name or reported (a rejection record
naming its id once the run ends). Written to fail on the main of the day the issue was
filed.
"""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import (
    ActivityState,
    LauncherSpec,
    SignalRefused,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.ids import activity_exec_id
from whimbrel.testing import wait_until

A, W = ActivityState, WorkflowState
EXT = LauncherSpec.external()


def _run(wb: Whimbrel, name: str, *, gate: bool) -> str:
    """A run whose wait ``S`` (signal ``go``) is followed by ``after`` (external), so the
    run is still RUNNING once ``S`` got its signal; with ``gate``, ``S`` waits behind an
    external ``gate`` (a signal sent first is kept early)."""
    acts = [Act("S", ("gate",) if gate else (), launcher=LauncherSpec.signal("go")),
            Act("after", ("S",), launcher=EXT)]
    if gate:
        acts.insert(0, Act("gate", launcher=EXT))
    wb.register_workflow(WorkflowDefinition(name, tuple(acts)))
    return wb.start_workflow(name)


def _finish(wb: Whimbrel, aeid: str) -> None:
    wait_until(lambda: wb.store.get_activity(aeid), timeout=15, message=f"{aeid} never made")
    wb.transition_activity(aeid, "RUNNING")
    wb.transition_activity(aeid, "COMPLETED")


def test_a_reused_signal_id_with_another_payload_is_refused_early_and_after_delivery(
        wb: Whimbrel) -> None:
    """Finding: refused only while the first signal waited; after delivery it returned OK
    and was dropped."""
    wx = _run(wb, "i20_sig_moments", gate=True)
    sid = f"sig-{uuid.uuid4()}"
    wb.signal(wx, "go", {"p": 1}, signal_id=sid)  # kept early: S does not wait yet
    with pytest.raises(SignalRefused):
        wb.signal(wx, "go", {"p": 2}, signal_id=sid)
    wb.signal(wx, "go", {"p": 1}, signal_id=sid)  # the same signal again: OK
    _finish(wb, activity_exec_id(wx, "gate", 1))
    s = activity_exec_id(wx, "S", 1)
    wait_until(lambda: wb.get_activity(s).state is A.COMPLETED, timeout=15,
               message="S never got its signal")
    assert wb.get_activity(s).output == {"p": 1}
    assert wb.get_workflow(wx).state is W.RUNNING
    # After delivery: still one signal.
    with pytest.raises(SignalRefused):
        wb.signal(wx, "go", {"p": 3}, signal_id=sid)
    wb.signal(wx, "go", {"p": 1}, signal_id=sid)
    assert wb.get_activity(s).output == {"p": 1}


def test_four_concurrent_senders_of_one_signal_id_one_wins(wb: Whimbrel) -> None:
    """Finding: four concurrent senders with one id and four payloads all got OK."""
    wx = _run(wb, "i20_sig_race", gate=False)
    s = activity_exec_id(wx, "S", 1)
    wait_until(lambda: wb.get_activity(s).state is A.READY, timeout=15,
               message="S never waited")
    sid = f"sig-{uuid.uuid4()}"
    barrier = threading.Barrier(4)
    results: dict[int, str] = {}

    def send(n: int) -> None:
        client = Whimbrel(endpoint_url=wb.endpoint_url, table_prefix=wb.table_prefix)
        try:
            barrier.wait(timeout=30)
            client.signal(wx, "go", {"sender": n}, signal_id=sid)
            results[n] = "OK"
        except SignalRefused:
            results[n] = "SignalRefused"
        except Exception as exc:
            results[n] = f"{type(exc).__name__}: {exc}"
        finally:
            client.close()

    threads = [threading.Thread(target=send, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(results.values()) == ["OK", "SignalRefused", "SignalRefused",
                                        "SignalRefused"], results
    winner = next(n for n, r in results.items() if r == "OK")
    wait_until(lambda: wb.get_activity(s).state is A.COMPLETED, timeout=15)
    assert wb.get_activity(s).output == {"sender": winner}
    wb.signal(wx, "go", {"sender": winner}, signal_id=sid)  # idempotent
    for n in range(4):
        if n != winner:
            with pytest.raises(SignalRefused):
                wb.signal(wx, "go", {"sender": n}, signal_id=sid)


def test_a_second_early_signal_is_reported_when_the_run_ends(wb: Whimbrel) -> None:
    """Finding: a second early signal under a new id was kept but never delivered, and
    nobody was told."""
    wx = _run(wb, "i20_sig_two", gate=True)
    first, second = f"sig-a-{uuid.uuid4()}", f"sig-b-{uuid.uuid4()}"
    wb.signal(wx, "go", {"from": "a"}, signal_id=first)
    wb.signal(wx, "go", {"from": "b"}, signal_id=second)
    _finish(wb, activity_exec_id(wx, "gate", 1))
    s = activity_exec_id(wx, "S", 1)
    wait_until(lambda: wb.get_activity(s).state is A.COMPLETED, timeout=15,
               message="S never got a signal")
    assert wb.get_activity(s).output == {"from": "a"}
    _finish(wb, activity_exec_id(wx, "after", 1))
    assert wb.wait(wx, timeout=15).state is W.COMPLETED

    def reported() -> list[str]:
        wb.sweep()  # whichever pass reports it: the run's end or its last visit
        return [r.reason for r in wb.list_rejections()
                if second in f"{r.reason} {json.dumps(r.record, default=str)}"]
    reasons = wait_until(reported, timeout=15,
                         message=f"the undelivered signal {second} was never reported")
    assert len(reasons) == 1, reasons
    assert not [r for r in wb.list_rejections()
                if first in f"{r.reason} {json.dumps(r.record, default=str)}"]
