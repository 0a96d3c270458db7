"""A nightly schedule with a backfill of the last three nights.

    cd examples/nightly_schedule
    python run.py

It registers the workflow, creates the schedule of schedules.yaml, backfills the
nights of the last three days (each once: run it twice, nothing starts twice), and
prints when the sweep (the heartbeat Lambda, `whimbrel dev`'s sweeper) fires it next.

With the CLI (PYTHONPATH=. so the python launcher finds the activities):

    whimbrel definitions register report.yaml
    whimbrel schedules apply schedules.yaml
    PYTHONPATH=. whimbrel schedules backfill nightly-report --start 3d --end 0s
    whimbrel schedules list
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import yaml

from whimbrel import Schedule, ScheduleInfo, Whimbrel, WorkflowDefinition

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # so the python launcher can import report_activities
DAY = 86400.0


def run(wb: Whimbrel) -> tuple[ScheduleInfo, list[str]]:
    wb.register_workflow(WorkflowDefinition.from_file(HERE / "report.yaml"))
    [entry] = yaml.safe_load((HERE / "schedules.yaml").read_text())["schedules"]
    info = wb.apply_schedule(Schedule.from_dict(entry))
    now = wb.clock()
    runs = wb.backfill_schedule(info.schedule_id, now - 3 * DAY, now)
    for wx in runs:
        wf = wb.wait(wx, timeout=60)
        print(f"{wf.workflow_request_id}: {wf.state.value} {wf.output.get('build')}")
    nxt = wb.get_schedule(info.schedule_id).next_fire_epoch or 0
    print(f"next firing: {datetime.fromtimestamp(nxt, UTC).isoformat()}")
    return info, runs


def main() -> int:
    with Whimbrel.from_env() as wb:
        wb.create_tables()
        run(wb)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
