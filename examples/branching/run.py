"""Run the charge-branch workflow in this process: an if/else that joins.

    cd examples/branching
    python run.py            # card accepted: ship runs, refund is SKIPPED, one receipt
    python run.py --decline  # card declined: refund runs, ship is SKIPPED, one receipt
    python run.py --fraud    # the charge ends the run early: everything else SKIPPED

or with the CLI (PYTHONPATH=. so the python launcher finds the activities):

    whimbrel definitions register refund.yaml
    PYTHONPATH=. whimbrel submit charge-branch --wait \\
        --input '{"card": "0000", "currency": "EUR", "address": "1 Quay St"}'
    whimbrel status <workflow_exec_id>       # ship  SKIPPED
    whimbrel graph <workflow_exec_id>        # SKIPPED work in its own class
"""

from __future__ import annotations

import sys
from pathlib import Path

from whimbrel import Whimbrel, WorkflowDefinition, WorkflowExec

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # so the python launcher can import branch_activities

CARDS = {"accept": "4242", "decline": "0000", "fraud": "6666"}


def run(wb: Whimbrel, case: str = "accept") -> WorkflowExec:
    wb.register_workflow(WorkflowDefinition.from_file(HERE / "refund.yaml"))
    wx = wb.start_workflow("charge-branch", {"card": CARDS[case], "currency": "EUR",
                                             "address": "1 Quay St"})
    wf = wb.wait(wx)
    states = ", ".join(f"{a.activity_name} {a.state.value}"
                       for a in sorted(wf.activities, key=lambda a: a.activity_name))
    shown = wf.output if wf.ended_by else wf.output.get("receipt")
    print(f"{wf.state.value}: {states}\noutput: {shown}")
    return wf


def main() -> int:
    args = sys.argv[1:]
    case = "decline" if "--decline" in args else "fraud" if "--fraud" in args else "accept"
    with Whimbrel.from_env() as wb:
        wb.create_tables()
        wf = run(wb, case)
        return 0 if wf.state.value == "COMPLETED" else 1


if __name__ == "__main__":
    raise SystemExit(main())
