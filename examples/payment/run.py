"""Run the wait-for-payment workflow in this process.

    cd examples/payment
    python run.py             # the payment arrives (even before the invoice): fulfilled
    python run.py --no-pay    # nobody pays: an hour later the payment TIMED_OUT

The hour is not waited for: the example calls the heartbeat listener's sweep at a time
an hour ahead, ``wb.sweep(now=...)``, as a test would. In production the scheduled
heartbeat Lambda (or ``whimbrel dev``) sweeps every minute. With the CLI:

    whimbrel definitions register payment.yaml
    PYTHONPATH=. whimbrel submit wait-for-payment --input '{"order": "o-17"}'
    whimbrel signal <workflow_exec_id> paid --payload '{"eur": 25}' --signal-id tx-17
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from whimbrel import Whimbrel, WorkflowDefinition, WorkflowExec

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # so the python launcher can import payment_activities


def run(wb: Whimbrel, *, pay: bool = True) -> WorkflowExec:
    wb.register_workflow(WorkflowDefinition.from_file(HERE / "payment.yaml"))
    wx = wb.start_workflow("wait-for-payment", {"order": "o-17"})
    print(f"started {wx}")
    if pay:
        # The bank's webhook may be faster than the invoice: the signal is kept until
        # the payment activity waits for it. The same signal_id sent again counts once.
        wb.signal(wx, "paid", {"eur": 25.0}, signal_id="tx-17")
        wb.signal(wx, "paid", {"eur": 25.0}, signal_id="tx-17")
    else:
        while (waits := wb.get_workflow(wx).activity("payment").waiting_for) is None:
            time.sleep(0.05)  # the invoice runs in this process's thread pool
        print(f"payment waits for {waits}; nobody pays")
        report = wb.sweep(now=wb.clock() + 3601)  # an hour later
        print(f"sweep an hour later: timed out {report.timed_out}")
    wf = wb.wait(wx)
    print(f"{wf.state.value}: {wf.output.get('fulfil') or wf.error}")
    return wf


def main() -> int:
    with Whimbrel.from_env() as wb:
        wb.create_tables()
        pay = "--no-pay" not in sys.argv[1:]
        wf = run(wb, pay=pay)
        return 0 if (wf.state.value == "COMPLETED") == pay else 1


if __name__ == "__main__":
    raise SystemExit(main())
