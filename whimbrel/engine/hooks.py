"""The one dispatcher of the features' hooks (feature.py): built once from the engine's
features, in the order of ``FEATURES``, it asks each hook of only the features that
take it, in one of four named ways:

- **take over** — the first taker that answers truthy decides; the rest (and the core's
  own handling) are not asked;
- **first answer** — the first taker's answer that is not None is the answer;
- **observe each** — every taker is told, in order (their answers come back in a list);
- **shape each** — every taker in turn shapes a value (the last positional argument)
  and hands it to the next.

A hook is named by the protocol's own method (``hooks.take_over(Feature.advance, wf,
…)``), so mypy checks its arguments; :data:`KINDS` says how each hook is asked, and a
dispatch in another way is refused. ``python -m whimbrel.engine`` prints which features
take each hook (:meth:`Hooks.table`); docs/architecture.md's hook table is tested
against it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from whimbrel.engine.feature import Feature

P = ParamSpec("P")
T = TypeVar("T")

TAKE_OVER = "take over"
FIRST_ANSWER = "first answer"
OBSERVE = "observe each"
SHAPE = "shape each"

#: How each hook of :class:`~whimbrel.engine.feature.Feature` is asked.
KINDS: dict[str, str] = {
    "registering": OBSERVE,
    "begin": SHAPE,
    "started": OBSERVE,
    "drives": FIRST_ANSWER,
    "new_attempt": SHAPE,
    "advance": TAKE_OVER,
    "admit": FIRST_ANSWER,
    "ready": OBSERVE,
    "readied": OBSERVE,
    "refuse": OBSERVE,
    "reads_run_after": TAKE_OVER,
    "follow_up": TAKE_OVER,
    "completed": OBSERVE,
    "moved": OBSERVE,
    "launched": OBSERVE,
    "attempt_ended": OBSERVE,
    "before_retry": TAKE_OVER,
    "failed_for_good": TAKE_OVER,
    "waiting_attempt": FIRST_ANSWER,
    "stop": FIRST_ANSWER,
    "cancelling": TAKE_OVER,
    "check_at_end": FIRST_ANSWER,
    "ended": OBSERVE,
    "after_end": OBSERVE,
    "finish_start": TAKE_OVER,
    "reconcile": OBSERVE,
    "sweep": OBSERVE,
    "due": FIRST_ANSWER,
}


def takes(kind: type[Any], hook: str) -> bool:
    """Whether the feature class ``kind`` takes ``hook`` (overrides the protocol's
    do-nothing default)."""
    return getattr(kind, hook) is not getattr(Feature, hook)


class Hooks:
    """The features' hooks, each asked of its takers only, in the features' order."""

    def __init__(self, features: Sequence[Feature]) -> None:
        self.features: tuple[Feature, ...] = tuple(features)
        self._takers: dict[str, tuple[Feature, ...]] = {
            hook: tuple(f for f in self.features if takes(type(f), hook)) for hook in KINDS}

    def _ask(self, hook: Callable[..., Any], kind: str) -> tuple[str, tuple[Feature, ...]]:
        name: str = hook.__name__
        if KINDS.get(name) != kind:
            raise TypeError(f"hook {name} is asked as {KINDS.get(name)!r}, not {kind!r}")
        return name, self._takers[name]

    def take_over(self, hook: Callable[Concatenate[Feature, P], bool],
                  *args: P.args, **kwargs: P.kwargs) -> bool:
        """True once a taker took it over (the ones after it are not asked)."""
        name, takers = self._ask(hook, TAKE_OVER)
        return any(getattr(f, name)(*args, **kwargs) for f in takers)

    def first_answer(self, hook: Callable[Concatenate[Feature, P], T | None],
                     *args: P.args, **kwargs: P.kwargs) -> T | None:
        """The first taker's answer that is not None (None: no taker answered)."""
        name, takers = self._ask(hook, FIRST_ANSWER)
        for f in takers:
            answer: T | None = getattr(f, name)(*args, **kwargs)
            if answer is not None:
                return answer
        return None

    def observe(self, hook: Callable[Concatenate[Feature, P], T],
                *args: P.args, **kwargs: P.kwargs) -> list[T]:
        """Every taker told, in order; their answers."""
        name, takers = self._ask(hook, OBSERVE)
        return [getattr(f, name)(*args, **kwargs) for f in takers]

    def shape(self, hook: Callable[Concatenate[Feature, P], T],
              *args: P.args, **kwargs: P.kwargs) -> T:
        """The last positional argument as every taker in turn shaped it."""
        name, takers = self._ask(hook, SHAPE)
        values: list[Any] = list(args)
        for f in takers:
            values[-1] = getattr(f, name)(*values, **kwargs)
        shaped: T = values[-1]
        return shaped

    def takers(self, hook: str) -> tuple[Feature, ...]:
        """The features that take ``hook``, in the order they are asked."""
        return self._takers[hook]

    def table(self) -> str:
        """Which features take each hook, and how it is asked (one line a hook)."""
        return describe(type(f) for f in self.features)


def describe(kinds: Iterable[type[Any]]) -> str:
    """The hook table of the feature classes ``kinds`` (in their order)."""
    classes = list(kinds)
    width = max(len(h) for h in KINDS)
    lines = []
    for hook, kind in KINDS.items():
        who = ", ".join(c.__name__ for c in classes if takes(c, hook)) or "-"
        lines.append(f"{hook:<{width}}  {kind:<12}  {who}")
    return "\n".join(lines)
