"""``@workflow``: a Python function as a workflow whose steps are activities."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from whimbrel.contract.code.definition import CodeDefinition
from whimbrel.contract.priority import DEFAULT_PRIORITY

if TYPE_CHECKING:
    from whimbrel.contract.code.context import WorkflowContext

Out = TypeVar("Out")
Fn = Callable[["WorkflowContext", Any], Out]


class CodeWorkflow(Generic[Out]):
    """A function decorated with :func:`workflow`: register it with
    ``Whimbrel.register_workflow`` and start it by name. Calling it calls the function."""

    def __init__(self, fn: Fn[Out], definition: CodeDefinition) -> None:
        self.fn = fn
        self.name = definition.name
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self._definition = definition

    def definition(self) -> CodeDefinition:
        """What is registered: the name, the function's ``module:qualname``, options."""
        return self._definition

    def __call__(self, ctx: WorkflowContext, input: Any) -> Out:
        return self.fn(ctx, input)

    def __repr__(self) -> str:
        return f"<code workflow {self.name!r} {self._definition.code}>"


def workflow(name: str, *, max_running: int | None = None,
             timeout_seconds: float | None = None, retention_days: float | None = None,
             priority: int = DEFAULT_PRIORITY) -> Callable[[Fn[Out]], CodeWorkflow[Out]]:
    """Make a module-level function ``fn(ctx, input)`` a workflow (docs/code-workflows.md).

    Args:
        name: the workflow's name (what ``start_workflow`` takes).
        max_running: at most this many runs RUNNING at once (None: no limit).
        timeout_seconds: a run still going this long after it started ends TIMED_OUT.
        retention_days: how long an ended run's rows are kept (None: the engine's
            default, 30 days unless configured).
        priority: the default priority of its runs, 0 (first) to 9.

    Raises:
        InvalidDefinition: an option is invalid, or the function is not module-level.
    """
    def wrap(fn: Fn[Out]) -> CodeWorkflow[Out]:
        code = f"{getattr(fn, '__module__', '')}:{getattr(fn, '__qualname__', '')}"
        defn = CodeDefinition(
            name=name, code=code, timeout_seconds=timeout_seconds,
            retention_days="default" if retention_days is None else retention_days,
            max_running=max_running, priority=priority).validate()
        return CodeWorkflow(fn, defn)
    return wrap
