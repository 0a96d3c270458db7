"""Issue 20, decision 1: one bad item never stops the sweep for everyone.

A run whose reconcile raises (here: a raw row no reader can make sense of, as the
native-map ``input`` of issue 20 was on the day it was filed — the native-map path itself
is in ``tests/e2e/test_i20_native.py``) is recorded as an error of the pass, and every
other item is still visited: a run past its own ``timeout_seconds`` times out in the same
pass. ``whimbrel sweep`` exits 0 and names the failed item. Written to fail on the main of
the day the issue was filed (``sweep()`` caught only ``WhimbrelError``).
"""

from __future__ import annotations

import time

import boto3
from typer.testing import CliRunner

from whimbrel import ActivityDefinition as Act
from whimbrel import LauncherSpec, SweepReport, Whimbrel, WorkflowDefinition, WorkflowState
from whimbrel.cli import app
from whimbrel.testing import StepClock

CLOCK = StepClock
W = WorkflowState
EXT = LauncherSpec.external()
LONG = 2 * 3600.0


def _error_count(report: SweepReport) -> int:
    """``SweepReport.errors``: the number of items that failed in the pass (a list of
    their descriptions is counted)."""
    errors = report.errors
    return errors if isinstance(errors, int) else len(errors)


def _two_runs(wb: Whimbrel) -> tuple[str, str]:
    """A run whose workflow row is corrupt (its version is text: no reader can load its
    definition) and a healthy run with a 3 s deadline."""
    wb.register_workflow(WorkflowDefinition("i20_broken", (Act("w", launcher=EXT),)))
    wb.register_workflow(WorkflowDefinition("i20_timed", (Act("w", launcher=EXT),),
                                            timeout_seconds=3))
    broken = wb.start_workflow("i20_broken")
    timed = wb.start_workflow("i20_timed")
    ddb = boto3.client("dynamodb", endpoint_url=wb.endpoint_url, region_name="us-east-1")
    ddb.update_item(TableName=f"{wb.table_prefix}workflow_exec",
                    Key={"workflow_exec_id": {"S": broken}},
                    UpdateExpression="SET #v = :v", ExpressionAttributeNames={"#v": "version"},
                    ExpressionAttributeValues={":v": {"S": "not-a-number"}})
    return broken, timed


def test_a_run_whose_reconcile_raises_is_an_error_and_the_pass_goes_on(
        wb: Whimbrel, clock: StepClock) -> None:
    broken, timed = _two_runs(wb)
    clock.advance(LONG)
    report = wb.sweep()  # must not raise, whatever the broken run raises
    assert timed in report.workflows_timed_out, report
    assert wb.get_workflow(timed).state is W.TIMED_OUT
    assert _error_count(report) == 1, report
    assert any(broken in str(e) for e in report.to_dict()["errors"]), report  # type: ignore[union-attr]
    # The next pass still visits (and reports) it: nothing is silently dropped.
    clock.advance(LONG)
    again = wb.sweep()
    assert _error_count(again) == 1, again


def test_whimbrel_sweep_exits_0_and_names_the_failed_item(ddb_endpoint: str,
                                                          table_prefix: str) -> None:
    """Finding: ``whimbrel sweep`` exited 1 (a traceback) on such a run."""
    # The runs are started two hours ago, so that the CLI's real clock finds them due.
    past = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                    clock=StepClock(time.time() - LONG))
    past.create_tables()
    try:
        broken, timed = _two_runs(past)
        result = CliRunner().invoke(app, ["sweep"], env={
            "WHIMBREL_ENDPOINT_URL": ddb_endpoint, "WHIMBREL_TABLE_PREFIX": table_prefix,
            "COLUMNS": "200"})
        text = f"{result.stdout}\n{result.stderr}"
        assert result.exit_code == 0, f"exit {result.exit_code}: {text}\n{result.exception!r}"
        assert broken in text, text
        assert past.get_workflow(timed).state is W.TIMED_OUT
    finally:
        past.close()
        past.store.delete_tables()
