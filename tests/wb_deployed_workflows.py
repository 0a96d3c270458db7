"""The user's code a deployed Lambda is given (``WHIMBREL_MODULES``) in the tests of
tests/integration/test_lambda_code_workflows.py: a code workflow with an ``external``
step (claimed and completed with rows, by a worker in any language), a signal and an
``sqs`` step (pushed by the Lambda that decided it; its consumer reports with rows),
and one with a python step (which a Lambda never runs)."""

from __future__ import annotations

from typing import Any

from whimbrel import ActivityRun, LauncherSpec, WorkflowContext, workflow


@workflow("deployed_order")
def deployed_order(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    reserved = ctx.step("reserve", {"id": input["id"]})  # external: rows complete it
    ctx.properties["stage"] = "reserved"
    paid = ctx.wait_signal("paid")
    shipped = ctx.step("ship", {"id": input["id"], "eur": paid["eur"]},
                       launcher=LauncherSpec("sqs", {"queue_url": input["queue"]}))
    ctx.properties["stage"] = "shipped"
    return {"reserved": reserved, "paid": paid, "shipped": shipped}


def double(run: ActivityRun) -> Any:
    return {"n": run.input["n"] * 2}


@workflow("deployed_python")
def deployed_python(ctx: WorkflowContext, input: dict[str, Any]) -> Any:
    return ctx.step(double, {"n": input["n"]})
