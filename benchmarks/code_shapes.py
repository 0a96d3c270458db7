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


def plus_one(run: Any) -> Any:
    """A map item's body: its element plus one (so the order of the outputs shows)."""
    return run.input + 1


@workflow("code_map")
def code_map(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    """One ``ctx.map`` of ``input["items"]`` no-op items, ``input["lanes"]`` at once."""
    n = int(input["items"])
    out = ctx.map(plus_one, range(n), max_concurrency=input["lanes"])
    return {"items": len(out), "in_order": out == list(range(1, n + 1))}
