"""Code workflows the fork tests fork from a step (issue 29), importable by module:name as
every process that decides or runs a step finds them. ``CALLS`` counts each step
function's calls by (run, step): a reused step is never called in the fork."""

from __future__ import annotations

import threading
from typing import Any

from whimbrel import ActivityRun, RetryPolicy, StepFailed, WorkflowContext, workflow

CALLS: dict[tuple[str, str], int] = {}
_LOCK = threading.Lock()
ONCE = RetryPolicy(max_attempts=1)
#: Steps that fail until a test "deploys the fix" (sets False).
BROKEN = {"ship": True}


def _count(run: ActivityRun) -> None:
    with _LOCK:
        key = (run.workflow_exec_id, run.activity_name)
        CALLS[key] = CALLS.get(key, 0) + 1


def calls(wx: str, step: str) -> int:
    return CALLS.get((wx, step), 0)


def add(run: ActivityRun) -> Any:
    _count(run)
    return run.input + 1


def reserve(run: ActivityRun) -> Any:
    _count(run)
    return {"hold": f"h-{run.input['order']}"}


def charge(run: ActivityRun) -> Any:
    _count(run)
    if not isinstance(run.input["cents"], int):
        raise TypeError(f"cents must be a whole number, not {run.input['cents']!r}")
    return {"paid": run.input["cents"], "key": run.input["key"]}


def release(run: ActivityRun) -> Any:
    _count(run)
    return {"released": run.input["hold"]}


def ship(run: ActivityRun) -> Any:
    _count(run)
    if BROKEN["ship"]:
        raise RuntimeError("carrier API refused the parcel")
    return {"shipped": run.input}


def _values(ctx: WorkflowContext) -> dict[str, Any]:
    return {"now": ctx.now().timestamp(), "uuid": str(ctx.uuid4()), "random": ctx.random()}


@workflow("fork_loop")
def loop(ctx: WorkflowContext, input: dict[str, Any]) -> Any:
    """``steps`` calls of ``add`` in a row (``add#1`` … ``add#<steps>``), each given the
    values the code computed just before it."""
    total, seen = input["start"], []
    for _ in range(input["steps"]):
        seen.append(_values(ctx))
        total = ctx.step(add, total)
        ctx.properties["total"] = total
    return {"total": total, "seen": seen}


def _saga(ctx: WorkflowContext, order: dict[str, Any], cents: Any) -> Any:
    ctx.properties["stage"] = "reserving"
    held = ctx.step(reserve, order)
    ctx.properties["stage"] = "charging"
    key = str(ctx.uuid4())  # the payment's idempotency key
    try:
        paid = ctx.step(charge, {"cents": cents, "key": key}, retry=ONCE)
    except StepFailed:
        ctx.properties["stage"] = "released"
        ctx.step(release, held)
        raise
    ctx.properties["stage"] = "paid"
    return {"held": held, "paid": paid}


@workflow("fork_saga")
def saga(ctx: WorkflowContext, order: dict[str, Any]) -> Any:
    """The bug: charges the amount as text ("12.50"), which ``charge`` refuses."""
    return _saga(ctx, order, order["amount"])


@workflow("fork_saga")
def saga_fixed(ctx: WorkflowContext, order: dict[str, Any]) -> Any:
    """The fix, registered as version 2 of ``fork_saga``: the amount in cents."""
    return _saga(ctx, order, round(float(order["amount"]) * 100))


@workflow("fork_waits")
def waits(ctx: WorkflowContext, input: Any) -> Any:
    """A signal and a sleep, then a step that fails while ``BROKEN["ship"]``."""
    paid = ctx.wait_signal("paid")
    ctx.sleep(3600)
    return ctx.step(ship, paid, retry=ONCE)


@workflow("fork_branchy")
def branchy(ctx: WorkflowContext, input: Any) -> Any:
    """An express order takes a first step the others do not."""
    if input.get("express"):
        ctx.step(add, 0, name="express")
    first = ctx.step(add, 1)
    return ctx.step(add, first)


@workflow("fork_parent")
def parent(ctx: WorkflowContext, input: Any) -> Any:
    """A child run, then a step that fails while ``BROKEN["ship"]``."""
    child = ctx.child("fork_loop", {"start": 0, "steps": 1})
    return ctx.step(ship, child["total"], retry=ONCE)
