"""Run the order-approval workflow in this process and decide its approval.

    cd examples/approval
    python run.py            # alice approves: the order ships
    python run.py --reject   # bob rejects: the run FAILED, naming him and why

or with the CLI (PYTHONPATH=. so the python launcher finds the activities):

    whimbrel definitions register order.yaml
    PYTHONPATH=. whimbrel submit order-approval --input '{"item": "kettle"}'
    whimbrel status <workflow_exec_id>       # approve  READY  ...  waits for approval
    PYTHONPATH=. whimbrel approve <workflow_exec_id>:approve:1 --by alice -m "in stock"
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from whimbrel import ActivityState, Whimbrel, WorkflowDefinition, WorkflowExec

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # so the python launcher can import order_activities


def run(wb: Whimbrel, *, reject: bool = False) -> WorkflowExec:
    wb.register_workflow(WorkflowDefinition.from_file(HERE / "order.yaml"))
    wx = wb.start_workflow("order-approval", {"item": "kettle"})
    print(f"started {wx}")
    while (gate := wb.get_workflow(wx).activity("approve")).state is not ActivityState.READY:
        time.sleep(0.05)  # take-order runs in this process's thread pool
    print(f"{gate.activity_exec_id} waits for {gate.waiting_for}")
    if reject:
        wb.reject(gate.activity_exec_id, by="bob", comment="out of stock")
    else:
        wb.approve(gate.activity_exec_id, by="alice", comment="in stock")
    wf = wb.wait(wx)
    print(f"{wf.state.value}: {wf.output.get('ship') or wf.error}")
    return wf


def main() -> int:
    with Whimbrel.from_env() as wb:
        wb.create_tables()
        wf = run(wb, reject="--reject" in sys.argv[1:])
        return 0 if wf.state.value == "COMPLETED" else 1


if __name__ == "__main__":
    raise SystemExit(main())
