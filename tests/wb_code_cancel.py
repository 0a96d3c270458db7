"""Code workflows that clean up when their run is cancelled (issue 26, "clean-up of a
cancelled suspended step"), and their steps (importable by module:name)."""

from __future__ import annotations

import threading
from typing import Any

from whimbrel import ActivityRun, Cancelled, LauncherSpec, StepFailed, WorkflowContext, workflow

#: Calls of each step function, by (run, step name): how often each ran.
CALLS: dict[tuple[str, str], int] = {}
_LOCK = threading.Lock()
#: A pushed launcher: the tests' recording ``lambda`` launcher starts nothing.
PUSHED = LauncherSpec("lambda", {"function": "undo"})
#: ``held`` steps run until the test sets it.
HOLD = threading.Event()


def _count(run: ActivityRun) -> None:
    with _LOCK:
        key = (run.workflow_exec_id, run.activity_name)
        CALLS[key] = CALLS.get(key, 0) + 1


def dispose(run: ActivityRun) -> Any:
    _count(run)
    return {"disposed": run.input}


def held(run: ActivityRun) -> Any:
    """A clean-up step that runs until the test lets it end (``HOLD``)."""
    _count(run)
    HOLD.wait(30)
    return "released"


def boom(run: ActivityRun) -> Any:
    raise RuntimeError("card declined")


def run_step(run: ActivityRun) -> Any:
    _count(run)
    return run.input["outcome"]


@workflow("cleanup_finally")
def cleanup_finally(ctx: WorkflowContext, input: Any) -> Any:
    """Waits for a signal; its ``finally`` disposes (after the signal, or a cancel)."""
    ctx.properties["stage"] = "waiting"
    try:
        return ctx.wait_signal("go")
    finally:
        ctx.properties["stage"] = "disposing"
        out = ctx.step(dispose, {"hold": ctx.workflow_exec_id})
        ctx.properties["stage"] = out


@workflow("cleanup_step")
def cleanup_step(ctx: WorkflowContext, input: Any) -> Any:
    """Waits on an external step; a cancel while it runs undoes it, in two steps."""
    try:
        return ctx.step("work", input)
    except Cancelled:
        first = ctx.step(dispose, "undo work")
        second = ctx.step(dispose, "tell someone")
        ctx.properties["undone"] = [first, second]
        raise


@workflow("cleanup_broad_except")
def cleanup_broad_except(ctx: WorkflowContext, input: Any) -> Any:
    """``except Exception`` around a wait: the cancel passes through it."""
    try:
        return ctx.wait_signal("go")
    except Exception:
        ctx.step(dispose, "never: not on a cancel")
        return "caught"


@workflow("cleanup_returns")
def cleanup_returns(ctx: WorkflowContext, input: Any) -> Any:
    """Catches the cancel and returns: the run still ends CANCELLED."""
    try:
        ctx.wait_signal("go")
    except Cancelled as exc:
        ctx.properties["cut"] = exc.step
        return "returned anyway"
    return "signalled"


@workflow("cleanup_raises")
def cleanup_raises(ctx: WorkflowContext, input: Any) -> Any:
    """Its clean-up fails: the run ends CANCELLED with that error."""
    try:
        ctx.wait_signal("go")
    finally:
        raise RuntimeError("disposal broke")


@workflow("cleanup_held")
def cleanup_held(ctx: WorkflowContext, input: Any) -> Any:
    """Its clean-up step runs until ``HOLD`` (a second cancel, a deadline meanwhile)."""
    try:
        ctx.wait_signal("go")
    finally:
        ctx.step(held, None)


@workflow("cleanup_deadline", timeout_seconds=3600)
def cleanup_deadline(ctx: WorkflowContext, input: Any) -> Any:
    """As ``cleanup_held``, with a deadline of an hour."""
    try:
        ctx.wait_signal("go")
    finally:
        ctx.step(held, None)


@workflow("cleanup_waits")
def cleanup_waits(ctx: WorkflowContext, input: Any) -> Any:
    """Its clean-up asks for a wait: that raises ``Cancelled`` again at once."""
    try:
        ctx.wait_signal("go")
    except Cancelled:
        try:
            ctx.sleep(60)
        except Cancelled:
            ctx.properties["sleep"] = "cancelled"
        ctx.step(dispose, "after the sleep")
        raise


@workflow("cleanup_external")
def cleanup_external(ctx: WorkflowContext, input: Any) -> Any:
    """Its clean-up asks for an external step: refused by name."""
    try:
        ctx.wait_signal("go")
    finally:
        ctx.step("undo")


@workflow("cleanup_crashy")
def cleanup_crashy(ctx: WorkflowContext, input: Any) -> Any:
    """External steps before the cancel; pushed clean-up steps after it (the test's
    recording launcher starts nothing: the test drives each end), two in parallel."""
    first = ctx.step("a", 1)
    try:
        ctx.step("a", 2)
    except Cancelled:
        handles = [ctx.start("undo", i, launcher=PUSHED) for i in range(2)]
        ctx.properties["undone"] = [h.result() for h in handles]
        ctx.step("undo", first, launcher=PUSHED)
        raise
    return first


@workflow("cleanup_after_failure")
def cleanup_after_failure(ctx: WorkflowContext, input: Any) -> Any:
    """Fails (``boom``) while an external step still runs: the run is failing."""
    slow = ctx.start("slow")
    ctx.step(boom)
    return slow.result()


@workflow("playbook_cleanup")
def playbook_cleanup(ctx: WorkflowContext, input: Any) -> Any:
    """The playbook's run (../shared/seeds/000_…): each step's outcome steers it; a
    step that suspends waits to be resumed, and a cancel while it waits runs the
    step's custom disposal (``CancelSuspendedStep``)."""
    for step in input["steps"]:
        outcome = ctx.step(run_step, step)                # Succeeded: go on
        if outcome == "complete":
            return {"completed_at": step["name"]}          # CompletePlaybook
        if outcome == "failed":
            raise RuntimeError(f"step {step['name']} failed")  # Failed
        if outcome == "suspend":                          # Suspended
            ctx.properties["suspended"] = step["name"]
            try:
                ctx.wait_signal("resume", timeout_seconds=86400)  # ResumePlaybook
            except Cancelled:                             # CancelSuspendedStep
                ctx.step(dispose, {"suspended": step["name"]})
                raise
    return {"completed_at": None}


@workflow("cleanup_parent")
def cleanup_parent(ctx: WorkflowContext, input: Any) -> Any:
    """Waits on a child (``cleanup_finally``) that cleans up too; then cleans up itself."""
    try:
        return ctx.child("cleanup_finally")
    finally:
        ctx.step(dispose, "parent")


@workflow("cleanup_times_out")
def cleanup_times_out(ctx: WorkflowContext, input: Any) -> Any:
    """Its clean-up step has a minute to run; it hangs (``HOLD``) and times out."""
    try:
        ctx.wait_signal("go")
    finally:
        try:
            ctx.step(held, None, start_to_close_seconds=60)
        except StepFailed as exc:
            ctx.properties["held"] = exc.state
