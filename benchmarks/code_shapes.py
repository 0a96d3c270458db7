"""Code workflows of the benchmarks (issue 26): the peers' shapes written with
``ctx.step``/``ctx.start``, each step the no-op activity of every benchmark."""

from __future__ import annotations

from typing import Any

from benchmarks.shapes import noop
from whimbrel import WorkflowContext, workflow


@workflow("code_chain")
def code_chain(ctx: WorkflowContext, input: dict[str, Any]) -> int:
    """``input["steps"]`` no-op steps one after the other."""
    for _ in range(input["steps"]):
        ctx.step(noop)
    return int(input["steps"])


@workflow("code_fan")
def code_fan(ctx: WorkflowContext, input: dict[str, Any]) -> int:
    """1 → ``input["width"]`` in parallel → 1."""
    ctx.step(noop, name="first")
    handles = [ctx.start(noop, i) for i in range(input["width"])]
    for handle in handles:
        handle.result()
    ctx.step(noop, name="last")
    return int(input["width"])
