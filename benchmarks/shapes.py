"""Every workflow shape the benchmarks run, defined once: stages run one after another,
the steps of a stage in parallel, each depending on every step of the stage before (a
chain of N is N stages of 1, the fan-out 1 -> N -> 1 is (1, N, 1)). Whimbrel gets a
``WorkflowDefinition`` from a shape; the peers walk the same stages their own way."""

from __future__ import annotations

from dataclasses import dataclass

from whimbrel import ActivityDefinition, LauncherSpec, WorkflowDefinition

NOOP = LauncherSpec.python("benchmarks.shapes:noop")
EXTERNAL = LauncherSpec.external()


def noop(run: object) -> None:
    """The activity body of every benchmark: what is left of the time is orchestration."""


@dataclass(frozen=True)
class Shape:
    key: str
    label: str
    stages: tuple[int, ...]

    @property
    def steps(self) -> int:
        return sum(self.stages)

    def names(self) -> list[list[str]]:
        """Activity names per stage (``s007`` in a stage of one, ``s001_0042`` otherwise)."""
        return [[f"s{i:03d}"] if w == 1 else [f"s{i:03d}_{j:04d}" for j in range(w)]
                for i, w in enumerate(self.stages)]

    def definition(self, name: str, launcher: LauncherSpec = NOOP) -> WorkflowDefinition:
        acts: list[ActivityDefinition] = []
        before: tuple[str, ...] = ()
        for stage in self.names():
            acts += [ActivityDefinition(a, before, launcher=launcher) for a in stage]
            before = tuple(stage)
        return WorkflowDefinition(name, tuple(acts))

    def floor_writes(self) -> int:
        """The contract's minimum: 4 writes per dependency-free activity, 5 with READY."""
        return 4 * self.stages[0] + 5 * (self.steps - self.stages[0])

    def sfn_transitions(self) -> int:
        """Step Functions: a Task per activity, a Parallel per wide stage, start, end."""
        return self.steps + sum(1 for w in self.stages if w > 1) + 2

    def temporal_actions(self) -> int:
        """Temporal Cloud: the workflow start plus one action per activity scheduled."""
        return 1 + self.steps


def chain(n: int) -> Shape:
    return Shape(f"chain{n}", f"chain of {n}", (1,) * n)


def diamond() -> Shape:
    return Shape("diamond", "diamond 1→2→1", (1, 2, 1))


def fan(width: int) -> Shape:
    return Shape(f"fan{width}", f"fan-out 1→{width}→1", (1, width, 1))
