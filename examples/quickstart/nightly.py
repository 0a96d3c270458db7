"""The README's Full Logic API example: python examples/quickstart/nightly.py"""

from whimbrel import ActivityDefinition as Act
from whimbrel import LauncherSpec, Whimbrel, WorkflowDefinition

wb = Whimbrel.from_env()            # WHIMBREL_ENDPOINT_URL, WHIMBREL_TABLE_PREFIX
wb.create_tables()                  # idempotent (whimbrel dev has created them)
wb.register_workflow(WorkflowDefinition("nightly", (
    Act("fetch", launcher=LauncherSpec.python("nightly_activities:fetch"),
        heartbeat_timeout_seconds=60),
    Act("report", ("fetch",), launcher=LauncherSpec.python("nightly_activities:report")),
)))
wx = wb.start_workflow("nightly", {"day": "2026-11-21"}, request_id="nightly-2026-11-21")
print(wb.wait(wx).state)            # COMPLETED

page = wb.list_workflows(name="nightly", state=["RUNNING", "COMPLETED"], since="7d")
for run in page.items:              # newest first; page.cursor fetches the next page
    print(run.workflow_exec_id, run.state)
