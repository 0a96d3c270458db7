"""Reading a spec back from the tables (pure; issue 31): the one tolerant reader.

A spec that was valid when written may not read back as this version expects: a newer
version wrote a field this one does not know (a rolling upgrade), or a person edited the
item by hand. Refusing to read it would stop everything that reads it with it — a sweep
firing every schedule, a listing of them all — for the sake of one item. So a stored
spec is read here, and only here, like this:

* fields this version does not know are **ignored** and **kept**: they are named in
  :attr:`Stored.ignored`, and nothing here or in its callers rewrites the stored text,
  so the version that wrote them still finds them;
* a spec that is no JSON object, lacks a field it needs, or holds a wrong type or value
  gives a record built from what the item itself says (its key, its plain attributes)
  with :attr:`Stored.problem` saying what is wrong: the item is still listed and shown,
  with its problem, and whatever acts on it (the sweep) skips it and says so, while
  every other item goes on.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    T = TypeVar("T", bound=DataclassInstance)
else:
    T = TypeVar("T")

#: A problem is shown in listings and logs: long values are cut, not the message.
MAX_PROBLEM_CHARS = 500


@dataclass(frozen=True)
class Stored(Generic[T]):
    """A spec as read back.

    Attributes:
        value: the spec (when ``problem`` is set: built from the item's own attributes,
            for showing it only).
        ignored: the fields this version does not know, kept in the item and ignored.
        problem: why this version cannot act on it, or None.
    """

    value: T
    ignored: tuple[str, ...] = ()
    problem: str | None = None


def read_spec(kind: type[T], text: Any, *, key: Mapping[str, Any],
              fallback: Mapping[str, Any], check: Callable[[T], list[str]]) -> Stored[T]:
    """Read a stored spec (JSON text, or the mapping it holds) as a ``kind`` dataclass.

    Args:
        kind: the spec's dataclass; its fields are the ones this version knows.
        text: the stored spec.
        key: the fields the item's key holds: they win over the spec (a spec that says
            otherwise has a problem).
        fallback: fields the item holds outside the spec: they fill what the spec
            lacks. ``kind(**key, **fallback)`` must build: it is the value when the spec
            cannot build one.
        check: the problems of a built value (empty: it can be acted on).

    Never raises for what the item holds: everything odd is a ``problem``.
    """
    body: Any = text
    if isinstance(text, str | bytes):
        try:
            body = json.loads(text)
        except (ValueError, RecursionError) as exc:
            return _bare(kind, key, fallback, (), f"the stored spec is not JSON: {exc}")
    if not isinstance(body, Mapping):
        return _bare(kind, key, fallback, (),
                     f"the stored spec is not a JSON object: {body!r}")
    known = {f.name for f in dataclasses.fields(kind)}
    ignored = tuple(sorted(str(k) for k in body if k not in known))
    problems = [f"the stored spec says {name} {body[name]!r}, its item {value!r}"
                for name, value in key.items() if name in body and body[name] != value]
    args = {**fallback, **{k: v for k, v in body.items() if k in known}, **key}
    try:
        value = kind(**args)
    except (TypeError, ValueError, AttributeError) as exc:  # __post_init__ on odd types
        return _bare(kind, key, fallback, ignored, f"the stored spec is odd: {exc}")
    problems.extend(check(value))
    return Stored(value, ignored, cut_problem("; ".join(problems)) if problems else None)


def _bare(kind: type[T], key: Mapping[str, Any], fallback: Mapping[str, Any],
          ignored: tuple[str, ...], problem: str) -> Stored[T]:
    return Stored(kind(**key, **fallback), ignored, cut_problem(problem))


def cut_problem(message: str) -> str:
    """A problem cut to :data:`MAX_PROBLEM_CHARS`."""
    return message if len(message) <= MAX_PROBLEM_CHARS else \
        message[:MAX_PROBLEM_CHARS - 1] + "…"
