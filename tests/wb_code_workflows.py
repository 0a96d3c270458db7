"""Code workflows and their steps for the tests (importable by module:name, as every
process that decides or runs a step finds them)."""

from __future__ import annotations

import json
import threading
from typing import Any

from whimbrel import ActivityRun, RetryPolicy, StepFailed, WaitTimedOut, WorkflowContext, workflow

#: Calls of each step function, by (run, step name): how often each ran.
CALLS: dict[tuple[str, str], int] = {}
_LOCK = threading.Lock()


def _count(run: ActivityRun) -> None:
    with _LOCK:
        key = (run.workflow_exec_id, run.activity_name)
        CALLS[key] = CALLS.get(key, 0) + 1


def add_one(run: ActivityRun) -> Any:
    _count(run)
    return {"n": run.input["n"] + 1}


def flaky(run: ActivityRun) -> Any:
    _count(run)
    if run.attempt < run.input["fail_until"]:
        raise ValueError(f"flaky attempt {run.attempt}")
    return run.attempt


def boom(run: ActivityRun) -> Any:
    _count(run)
    raise RuntimeError("card declined")


def echo(run: ActivityRun) -> Any:
    _count(run)
    return run.input


@workflow("chain")
def chain(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    value = {"n": input["n"]}
    for _ in range(input["steps"]):
        value = ctx.step(add_one, value)
    return value


@workflow("retrying")
def retrying(ctx: WorkflowContext, input: Any) -> Any:
    return ctx.step(flaky, input, retry=RetryPolicy(max_attempts=3,
                                                  initial_interval_seconds=0.0))


@workflow("caught")
def caught(ctx: WorkflowContext, input: Any) -> Any:
    try:
        ctx.step(boom, {"card": 1}, retry=RetryPolicy(max_attempts=2,
                                                      initial_interval_seconds=0.0))
    except StepFailed as exc:
        refund = ctx.step(echo, {"undo": exc.activity_exec_id}, name="refund")
        return {"state": exc.state, "error": exc.error, "error_type": exc.error_type,
                "refund": refund}
    return "charged"


@workflow("uncaught")
def uncaught(ctx: WorkflowContext, input: Any) -> Any:
    ctx.step(echo, 1)
    raise KeyError("no such order")


@workflow("named", priority=3)
def named(ctx: WorkflowContext, input: Any) -> Any:
    a = ctx.step(echo, "a")
    b = ctx.step(echo, "b")
    c = ctx.step(echo, "c", name="other")
    return [a, b, c]


#: Which version of ``evolving``'s code is deployed (the tests change it under a run).
DEPLOYED = {"evolving": 1}


@workflow("evolving")
def evolving(ctx: WorkflowContext, input: Any) -> Any:
    if DEPLOYED["evolving"] == 2:  # a change that asks for another first step
        ctx.step(echo, "new first step")
    gate = ctx.step("gate")  # an external step: the test completes it
    return ctx.step(echo, {"after": gate})


def _values(ctx: WorkflowContext) -> dict[str, Any]:
    return {"now": ctx.now().timestamp(), "uuid": str(ctx.uuid4()), "random": ctx.random()}


@workflow("deterministic")
def deterministic(ctx: WorkflowContext, input: Any) -> Any:
    seen = _values(ctx)
    first = ctx.step(echo, seen)  # its input was computed by the first decision
    later = _values(ctx)
    second = ctx.step(echo, later, name="again")
    return {"recorded": first, "replayed": seen, "second": second}


@workflow("props")
def props(ctx: WorkflowContext, input: Any) -> Any:
    ctx.properties["stage"] = "waiting for the gate"
    ctx.properties["order"] = input["order"]
    gate = ctx.step("gate")
    ctx.properties["stage"] = "done"
    ctx.properties["gate"] = gate
    return gate


@workflow("parallel")
def parallel(ctx: WorkflowContext, input: Any) -> Any:
    first = ctx.step(echo, "first", name="first")
    handles = [ctx.start(add_one, {"n": i}) for i in range(input["width"])]
    outs = [h.result()["n"] for h in handles]
    ctx.step(echo, outs, name="last")
    return {"first": first, "outs": outs}


@workflow("fails_for_good")
def fails_for_good(ctx: WorkflowContext, input: Any) -> Any:
    done = ctx.step(echo, "kept")
    return [done, ctx.step(flaky, {"fail_until": 99})]


@workflow("sleeper")
def sleeper(ctx: WorkflowContext, input: Any) -> Any:
    before = ctx.now().timestamp()
    ctx.sleep(86400)
    return {"slept": ctx.now().timestamp() - before}


@workflow("signals")
def signals(ctx: WorkflowContext, input: Any) -> Any:
    ctx.step("gate")  # signals sent while this waits are kept
    first = ctx.wait_signal("paid")
    shipped = ctx.wait_signal("shipped")
    second = ctx.wait_signal("paid")
    return [first, second, shipped]


@workflow("signal_timeout")
def signal_timeout(ctx: WorkflowContext, input: Any) -> Any:
    try:
        return ctx.wait_signal("never", timeout_seconds=60)
    except WaitTimedOut as exc:
        return {"timed_out": exc.wait}


@workflow("approved")
def approved(ctx: WorkflowContext, input: Any) -> Any:
    decision = ctx.wait_approval(["alice"], timeout_seconds=3600)
    return {"decision": decision}


@workflow("countdown")
def countdown(ctx: WorkflowContext, input: Any) -> Any:
    n = ctx.step(echo, input["n"])
    if n > 0:
        ctx.continue_as_new({"n": n - 1})
    return "done"


@workflow("patchy")
def patchy(ctx: WorkflowContext, input: Any) -> Any:
    ctx.step("gate")
    out = []
    if DEPLOYED.get("patchy") == 2 and ctx.patched("extra"):  # version 2 adds a step
        out.append(ctx.step(echo, "extra"))
    out.append(ctx.step(echo, "end"))
    ctx.step("gate2")
    return out


@workflow("parent")
def parent(ctx: WorkflowContext, input: Any) -> Any:
    out = ctx.child("chain", {"n": 10, "steps": 2})
    dispatched = ctx.child("named", None, wait=False)
    return {"child": out, "dispatched": dispatched}


@workflow("crashy")
def crashy(ctx: WorkflowContext, input: Any) -> Any:
    """External steps only: the test drives each end, so the writes come in one order."""
    first = ctx.step("a", 1)
    handles = [ctx.start("p", i) for i in range(2)]
    outs = [h.result() for h in handles]
    ctx.properties["outs"] = outs
    last = ctx.step("a", 2)
    return [first, outs, last]


@workflow("crashy_map")
def crashy_map(ctx: WorkflowContext, input: Any) -> Any:
    """A ctx.map of external items in two lanes, then a step: the test drives each end."""
    outs = ctx.map("m", [0, 1, 2], max_concurrency=2)
    return [outs, ctx.step("a", 9)]


def json_loads(text: str | None) -> Any:
    """A step's input as the test hands it back as its output."""
    return None if text is None else json.loads(text)


def half(run: ActivityRun) -> Any:
    _count(run)
    if run.input % 7 == 3:
        raise ValueError(f"{run.input} is unlucky")
    return run.input / 2


@workflow("mapper")
def mapper(ctx: WorkflowContext, input: Any) -> Any:
    return ctx.map(half, list(range(input["n"])), max_concurrency=input["lanes"],
                   tolerated_failures=input["tolerated"])


@workflow("big_values")
def big_values(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    """A step's input and the run's output past the no-bucket limits (128,000 and 64,000
    bytes): kept in the payload bucket like any other payload."""
    blob = "x" * input["size"]
    got = ctx.step(echo, {"blob": blob})
    return {"blob": got["blob"], "again": got["blob"]}
