"""What the definition checks read of an activity and of a workflow, as protocols.

The checks of data flow (``dataflow.py``), flow control (``flow.py``) and kinds
(``kinds.py``, ``waits.py``) are run by the definitions themselves
(``ActivityDefinition``, ``WorkflowDefinition``), so they take the definitions by these
shapes instead of importing their modules: no module of the contract imports one that
imports it. The definitions satisfy them field for field (mypy checks each call).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = ["ActivityShape", "LauncherShape", "WorkflowShape"]


class LauncherShape(Protocol):
    """The fields of a ``LauncherSpec`` the checks read."""

    @property
    def kind(self) -> str: ...
    @property
    def config(self) -> Mapping[str, Any]: ...


class ActivityShape(Protocol):
    """The fields of an ``ActivityDefinition`` the checks read (read-only: it is frozen)."""

    @property
    def name(self) -> str: ...
    @property
    def depends_on(self) -> tuple[str, ...]: ...
    @property
    def launcher(self) -> LauncherShape: ...
    @property
    def heartbeat_timeout_seconds(self) -> float | None: ...
    @property
    def input(self) -> Mapping[str, Any] | None: ...
    @property
    def map_over(self) -> str | None: ...
    @property
    def max_concurrency(self) -> int | None: ...
    @property
    def tolerated_failures(self) -> int: ...
    @property
    def on_failure(self) -> str | None: ...
    @property
    def pool(self) -> str | None: ...
    @property
    def priority(self) -> int: ...
    @property
    def when(self) -> str | None: ...
    @property
    def trigger(self) -> str: ...
    @property
    def input_from(self) -> dict[str, str]: ...


class WorkflowShape(Protocol):
    """The fields of a ``WorkflowDefinition`` the checks read."""

    @property
    def name(self) -> str: ...
    @property
    def activities(self) -> Sequence[ActivityShape]: ...
    @property
    def max_running(self) -> int | None: ...

    def activity(self, name: str) -> ActivityShape: ...
