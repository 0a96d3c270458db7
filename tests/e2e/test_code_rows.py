"""Code workflows through the local runtime (issue 26): a request row starts the run and
the stream handlers make its decisions, importing the function by its module:qualname
(this process only registered the definition); a SIGNAL row reaches a code run's wait."""

from __future__ import annotations

import json
from typing import Any

import pytest
import wb_code_workflows as code
from e2e_support import RawClient, wait_workflow

from whimbrel import ActivityState as A
from whimbrel import Whimbrel, WorkflowContext, workflow
from whimbrel import WorkflowState as W
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.engine.code_runs import CodeRuns
from whimbrel.local.runtime import LocalRuntime
from whimbrel.testing import wait_until

pytestmark = pytest.mark.slow


def _register_definition_only(rt: LocalRuntime, *workflows: code.CodeWorkflow) -> None:
    for wf in workflows:  # no function in this client: the handlers import it
        rt.client.engine.definitions.register(wf.definition())


def test_a_request_row_runs_a_sequence_decided_in_the_stream_handlers(
        runtime: LocalRuntime, raw: RawClient) -> None:
    _register_definition_only(runtime, code.chain)
    run = wait_workflow(runtime, raw.request("chain", {"n": 1, "steps": 3}), timeout=60)
    assert run.state is W.COMPLETED, run
    assert run.output == {"n": 4}
    assert [a.activity_name for a in run.activities] == ["add_one#1", "add_one#2",
                                                         "add_one#3"]


def test_a_signal_row_reaches_a_code_runs_wait(runtime: LocalRuntime,
                                               raw: RawClient) -> None:
    _register_definition_only(runtime, code.signals)
    request = raw.request("signals")
    wx = workflow_exec_id_for(request)
    gate = f"{wx}:gate#1:1"
    wait_until(lambda: runtime.client.store.get_activity(gate) is not None, timeout=15)
    for sent, (name, payload) in enumerate((("paid", 1), ("shipped", 3), ("paid", 2)), 1):
        raw.row("SIGNAL", workflow_exec_id=wx, signal=name,
                payload={"S": json.dumps(payload)})
        wait_until(lambda n=sent: len(runtime.client.store.signals.list_signals(wx)) >= n,
                   timeout=15)  # kept (in send order) before the next is sent
    raw.event(gate, "RUNNING")
    raw.event(gate, "COMPLETED")
    run = wait_workflow(runtime, request, timeout=60)
    assert run.state is W.COMPLETED, run
    assert run.output == [1, 2, 3]
    assert all(a.state is A.COMPLETED for a in run.activities)


def test_a_request_row_runs_a_map(runtime: LocalRuntime, raw: RawClient) -> None:
    _register_definition_only(runtime, code.mapper)
    run = wait_workflow(runtime, raw.request("mapper", {"n": 6, "lanes": 2, "tolerated": 1}),
                        timeout=60)
    assert run.state is W.COMPLETED, run
    assert run.output == [0, 0.5, 1, None, 2, 2.5]
    # One map step; its items in map_item, chained by the stream handlers' follow-ups.
    assert [a.activity_name for a in run.activities] == ["half#1"]
    assert sorted(run.map_items("half#1")) == list(range(6))


def test_decisions_whimbrel_dev_cannot_make_are_left_for_the_client_with_the_code(
        runtime: LocalRuntime, raw: RawClient, ddb_endpoint: str, table_prefix: str) -> None:
    """The workflow's function is defined here, in a test: the local runtime (a worker
    for what it can import) cannot import it, so it leaves each decision — the first,
    after the request row, too — for ``owner``, the client that registered it."""

    @workflow("local_rows")
    def local_rows(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
        value = {"n": input["n"]}
        for _ in range(2):
            value = ctx.step(code.add_one, value)
        return value

    with Whimbrel(endpoint_url=ddb_endpoint, table_prefix=table_prefix) as owner:
        owner.register_workflow(local_rows)
        run = wait_workflow(runtime, raw.request("local_rows", {"n": 1}), timeout=60)
        assert run.state is W.COMPLETED, run
        assert run.output == {"n": 3}
        assert owner.engine.feature(CodeRuns).decisions >= 3
    handlers = runtime.engine.feature(CodeRuns)  # the stream handlers' engine
    assert handlers.decisions == 0
    assert handlers.left >= 1  # the start's decision, at least
