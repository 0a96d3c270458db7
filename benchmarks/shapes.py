"""DAG shapes of no-op activities, shared by the benchmarks."""

from __future__ import annotations

from whimbrel.contract.definitions import ActivityDefinition, LauncherSpec, WorkflowDefinition

NOOP = LauncherSpec.python("benchmarks.activities:noop")
EXTERNAL = LauncherSpec.external()


def chain(name: str, n: int, launcher: LauncherSpec = NOOP) -> WorkflowDefinition:
    """a0 -> a1 -> ... -> a(n-1)."""
    return WorkflowDefinition(name, tuple(
        ActivityDefinition(f"a{i}", (f"a{i - 1}",) if i else (), launcher=launcher)
        for i in range(n)))


def fan(name: str, width: int, launcher: LauncherSpec = NOOP) -> WorkflowDefinition:
    """root -> width parallel activities -> end."""
    middle = tuple(f"m{i}" for i in range(width))
    return WorkflowDefinition(name, (
        ActivityDefinition("root", launcher=launcher),
        *(ActivityDefinition(m, ("root",), launcher=launcher) for m in middle),
        ActivityDefinition("end", middle, launcher=launcher),
    ))


def diamond(name: str, launcher: LauncherSpec = NOOP) -> WorkflowDefinition:
    """root -> (left, right) -> end."""
    return WorkflowDefinition(name, (
        ActivityDefinition("root", launcher=launcher),
        ActivityDefinition("left", ("root",), launcher=launcher),
        ActivityDefinition("right", ("root",), launcher=launcher),
        ActivityDefinition("end", ("left", "right"), launcher=launcher),
    ))
