"""Run the four code-workflow examples in this process (docs/code-workflows.md).

    cd examples/code_workflows
    python run.py            # with the `export` lines of `whimbrel dev`

Each prints what its run did. This process registers the workflows, so it makes their
decisions and runs their steps; it also sweeps (ends the poll loop's sleeps), which
`whimbrel dev`'s sweeper would do as well.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # so the python launcher can import shop_steps

from workflows import booking, poll_job, shop_order, trip  # noqa: E402  # after the path

from whimbrel import ActivityState, Whimbrel, WorkflowExec  # noqa: E402


def _finish(wb: Whimbrel, wx: str, timeout: float = 60) -> WorkflowExec:
    deadline = time.monotonic() + timeout
    while not (run := wb.get_workflow(wx)).state.is_terminal:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{wx} still {run.state.value}")
        wb.sweep()  # a sleep that is due ends here (or in whimbrel dev's sweeper)
        time.sleep(0.2)
    return run


def poll(wb: Whimbrel) -> WorkflowExec:
    wb.register_workflow(poll_job)
    run = _finish(wb, wb.start_workflow("poll_job", {"job": f"job-{time.time_ns()}"}))
    print(f"poll_job {run.state.value} after {run.output['looks']} looks: "
          f"{[a.activity_name for a in run.activities]}")
    return run


def saga(wb: Whimbrel, *, eur: float = 1200) -> WorkflowExec:
    wb.register_workflow(trip)
    run = wb.wait(wb.start_workflow("trip", {"trip": "t-1", "eur": eur}))
    outcome = (run.error or "").splitlines()[0] if run.error else run.output
    print(f"trip {run.state.value}: {outcome}; steps "
          f"{[a.activity_name for a in run.activities]}")
    return run


def order(wb: Whimbrel) -> WorkflowExec:
    wb.register_workflow(shop_order)
    wx = wb.start_workflow("shop_order", {"order": "o-17"})
    wb.signal(wx, "paid", {"eur": 25.0}, signal_id="payment-o-17")  # kept if early
    while (gate := next((a for a in wb.get_workflow(wx).activities
                         if a.activity_name == "approval#1"), None)) is None \
            or gate.state is not ActivityState.READY:
        time.sleep(0.05)
    print(f"shop_order properties: {wb.get_workflow(wx).properties}")
    wb.approve(gate.activity_exec_id, by="alice", comment="in stock")
    run = wb.wait(wx)
    print(f"shop_order {run.state.value}: {run.output}; properties {run.properties}")
    return run


def cancelled_booking(wb: Whimbrel) -> WorkflowExec:
    wb.register_workflow(booking)
    wx = wb.start_workflow("booking", {"show": "s-9", "seats": 2})
    while (wait := next((a for a in wb.get_workflow(wx).activities
                         if a.activity_name == "signal-paid#1"), None)) is None \
            or wait.state is not ActivityState.READY:
        time.sleep(0.05)
    wb.cancel_workflow(wx)  # the customer walked away: the wait raises Cancelled
    run = wb.wait(wx)
    print(f"booking {run.state.value}: properties {run.properties}; steps "
          f"{[(a.activity_name, a.state.value) for a in run.activities]}")
    return run


def main() -> int:
    with Whimbrel.from_env() as wb:
        wb.create_tables()
        runs = [poll(wb), saga(wb), order(wb), cancelled_booking(wb)]
    return 0 if [r.state.value for r in runs] == [
        "COMPLETED", "FAILED", "COMPLETED", "CANCELLED"] else 1


if __name__ == "__main__":
    sys.exit(main())
