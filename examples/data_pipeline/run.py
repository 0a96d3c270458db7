"""Register and run the daily-sales pipeline in this process (Full Logic API).

    cd examples/data_pipeline
    python run.py 2024-06-01

or, with the CLI (PYTHONPATH=. so the python launcher finds the activities):

    whimbrel definitions register pipeline.yaml
    PYTHONPATH=. whimbrel submit daily-sales --input '{"day": "2024-06-01"}' --wait
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from whimbrel import Whimbrel, WorkflowDefinition

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # so the python launcher can import pipeline_activities


def main(day: str) -> int:
    with Whimbrel.from_env() as wb:
        wb.create_tables()
        version = wb.register_workflow(WorkflowDefinition.from_file(HERE / "pipeline.yaml"))
        wx = wb.start_workflow("daily-sales", {"day": day, "flaky": True}, version=version)
        print(f"started {wx}; watch it with: whimbrel status {wx} --watch")
        # Retries after a back-off are launched by the sweeper (the scheduled heartbeat
        # Lambda, or `whimbrel dev`). Without either, sweep here while waiting.
        while not (wf := wb.get_workflow(wx)).state.is_terminal:
            done = sum(a.state.is_terminal for a in wf.latest_activities.values())
            print(f"  {wf.state.value:<10} {done}/{len(wf.latest_activities)} activities done")
            wb.sweep()
            time.sleep(0.5)
        wf = wb.get_workflow(wx)
        print(f"{wf.state.value}: {wf.output.get('aggregate')}")
        return 0 if wf.state.value == "COMPLETED" else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else "2024-06-01"))
