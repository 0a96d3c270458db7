"""A code workflow's step inputs and output go through the payload bucket like every
other payload (issue 27: "every payload path"): with a bucket, a step input over 128,000
bytes and an output over 64,000 bytes are kept in S3 and read back whole; without one,
the run fails with the error that names ``payload_bucket``."""

from __future__ import annotations

import pytest
import wb_code_workflows

from whimbrel import Whimbrel, WorkflowState

SIZE = 200_000  # over both no-bucket limits


@pytest.mark.parametrize("with_bucket", [True, False])
def test_large_step_input_and_output_of_a_code_workflow(
        ddb_endpoint: str, table_prefix: str, request: pytest.FixtureRequest,
        with_bucket: bool) -> None:
    bucket = request.getfixturevalue("payload_bucket") if with_bucket else None
    wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix,
                  payload_bucket=bucket)
    wb.create_tables()
    try:
        wb.register_workflow(wb_code_workflows.big_values)
        wx = wb.start_workflow("big_values", {"size": SIZE})
        run = wb.wait(wx, timeout=60)
        if with_bucket:
            assert run.state is WorkflowState.COMPLETED, run.error
            assert run.output == {"blob": "x" * SIZE, "again": "x" * SIZE}
        else:
            assert run.state is WorkflowState.FAILED
            assert "input of step echo#1" in (run.error or "")
            assert "payload_bucket" in (run.error or "")
    finally:
        wb.close()
        wb.store.delete_tables()
