"""Conditions, inputs from data and skip propagation (pure; issue 22).

* ``ActivityDefinition.when`` is a JMESPath expression over the activity's **document**
  ``{"input": <run input>, "<upstream>": <its output>, ...}`` — one key per activity in
  its ``depends_on``, holding what it resolved to (its output, a failure handler's in its
  place, ``null`` for a SKIPPED upstream or one run past with ``on_failure: continue``).
  False (JMESPath truthiness, :func:`truthy`) → the activity ends SKIPPED without
  launching.
* ``ActivityDefinition.input_from`` maps input keys to JMESPath expressions over the
  same document, evaluated at launch (:func:`build_input`) and merged over the input.
* ``ActivityDefinition.trigger`` says what the activity does when an upstream was
  SKIPPED (:func:`decide`): ``all_completed`` (the default) skips it too;
  ``none_failed`` runs it when every upstream COMPLETED or was SKIPPED and at least one
  COMPLETED — if/else branches that join.

Expressions are checked when a definition is validated (:func:`expression_problem`):
syntax with its position, unknown functions and wrong argument counts, and top-level
names that are neither ``input`` nor an upstream (they would always be ``null``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from enum import StrEnum
from functools import lru_cache
from typing import Any

import jmespath
from jmespath import exceptions as jexc
from jmespath import functions as jfunctions
from jmespath import lexer as jlexer
from jmespath.parser import ParsedResult

from whimbrel.contract.errors import InvalidInput

#: The document's key holding the run's input (an upstream may not be named so, when the
#: activity uses ``when`` or ``input_from``: definitions refuse it).
INPUT_KEY = "input"
#: Longest expression accepted (a condition is a line, not a program).
MAX_EXPRESSION_CHARS = 1000


class Trigger(StrEnum):
    """When an activity with a SKIPPED upstream runs."""

    ALL_COMPLETED = "all_completed"
    NONE_FAILED = "none_failed"


class Outcome(StrEnum):
    """How one upstream counts for its dependent (the engine maps attempts onto these).

    COMPLETED: its latest attempt COMPLETED, or its failure is resolved (``on_failure``).
    SKIPPED: it ended SKIPPED. FAILED: it ended otherwise for good (failed, timed out,
    cancelled, no resolution). PENDING: not ended yet (or a retry is coming).
    """

    COMPLETED = "COMPLETED"
    SKIPPED = "SKIPPED"
    FAILED = "FAILED"
    PENDING = "PENDING"


class Decision(StrEnum):
    """What becomes of an activity whose upstreams are as given."""

    RUN = "RUN"      #: it becomes READY (then ``when`` is evaluated)
    SKIP = "SKIP"    #: it ends SKIPPED, and its dependents are decided in turn
    WAIT = "WAIT"    #: nothing yet (an upstream is pending, or failed: the run's failure
    #: path ends it, as today)


# -- expressions ---------------------------------------------------------------------------

def compile_expression(expr: str) -> ParsedResult:
    """The compiled form of ``expr``, cached (the engine evaluates on every readiness).

    Raises:
        ValueError: ``expr`` is not a JMESPath expression; the message names the
            position (0-based character offset) and the offending token.
    """
    # Checked before the cache, which would raise a bare TypeError for a list or a dict.
    if not isinstance(expr, str) or not expr.strip():
        raise ValueError(f"must be a non-empty JMESPath expression, not {expr!r}"[:200])
    return _compile(expr)


@lru_cache(maxsize=1024)
def _compile(expr: str) -> ParsedResult:
    if len(expr) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        return jmespath.compile(expr)
    except jexc.ParseError as exc:
        pos = exc.lex_position
        token = exc.token_value
        what = f"unexpected {token!r}" if token is not None else "the expression ends early"
        caret = f"{expr}\n{' ' * pos}^" if isinstance(pos, int) else expr
        raise ValueError(f"is not valid JMESPath at position {pos}: {what} "
                         f"({exc.msg})\n{caret}") from None
    except jexc.JMESPathError as exc:  # EmptyExpressionError and kin
        raise ValueError(f"is not valid JMESPath: {exc}") from None


_FUNCTIONS: Mapping[str, Any] = jfunctions.Functions.FUNCTION_TABLE


def _arity_problem(name: str, given: int) -> str | None:
    sig = _FUNCTIONS[name]["signature"]
    variadic = bool(sig) and bool(sig[-1].get("variadic"))
    if variadic and given < len(sig):
        return f"{name}() takes at least {len(sig)} argument(s), not {given}"
    if not variadic and given != len(sig):
        return f"{name}() takes {len(sig)} argument(s), not {given}"
    return None


def _walk(node: Mapping[str, Any], at_root: bool, roots: set[str], bad: list[str]) -> None:
    """Collect the top-level names read from the document and function misuse.

    ``at_root`` is True while ``node`` is evaluated against the document itself (not
    against an element of a projection, the right side of a pipe, or an ``&expref``).
    """
    kind = node.get("type")
    # A slice's children are its bounds (numbers or None), not nodes.
    kids: list[Mapping[str, Any]] = [k for k in node.get("children", ())
                                     if isinstance(k, Mapping)]
    if kind == "field":
        if at_root:
            roots.add(str(node["value"]))
        return
    if kind == "function_expression":
        name = str(node["value"])
        if name not in _FUNCTIONS:
            bad.append(f"unknown function {name}()")
        else:
            problem = _arity_problem(name, len(kids))
            if problem:
                bad.append(problem)
        for kid in kids:
            _walk(kid, at_root, roots, bad)
        return
    if kind == "expref":
        for kid in kids:
            _walk(kid, False, roots, bad)
        return
    if kind in ("subexpression", "index_expression", "pipe", "projection",
                "value_projection", "filter_projection"):
        # The left side reads the current node; the rest reads what it produced.
        for i, kid in enumerate(kids):
            _walk(kid, at_root and i == 0, roots, bad)
        return
    for kid in kids:  # and/or/not, comparators, multi-selects, flatten, key_val_pair…
        _walk(kid, at_root, roots, bad)


def expression_problem(expr: Any, known: Iterable[str] | None = None) -> str | None:
    """What is wrong with ``expr`` as a ``when`` or ``input_from`` expression, or None.

    Args:
        expr: the expression text.
        known: names the document will hold (``input`` and the upstreams); when given,
            a top-level name outside it is a problem (it would always read ``null``).
    """
    try:
        parsed = compile_expression(expr)
    except ValueError as exc:
        return str(exc)
    with warnings.catch_warnings(record=True) as caught:  # registration only, not per run
        warnings.simplefilter("always")
        list(jlexer.Lexer().tokenize(expr))  # the parser caches: lex afresh
    if any("deprecated string literal" in str(w.message) for w in caught):
        return ("uses the deprecated `text` literal (not JSON between backquotes); write "
                "'text' or `\"text\"`")
    roots: set[str] = set()
    bad: list[str] = []
    _walk(parsed.parsed, True, roots, bad)
    if known is not None:
        allowed = set(known)
        unknown = sorted(roots - allowed)
        if unknown:
            bad.append(f"reads {', '.join(unknown)}, which is neither {INPUT_KEY!r} nor an "
                       f"activity in depends_on ({', '.join(sorted(allowed))})")
    return "; ".join(bad) or None


# -- evaluation ----------------------------------------------------------------------------

def document(run_input: Any, upstream: Mapping[str, Any]) -> dict[str, Any]:
    """The document expressions read: the run's input and each upstream's output."""
    return {**upstream, INPUT_KEY: run_input}


def truthy(value: Any) -> bool:
    """JMESPath truthiness: ``false``, ``null``, and an empty list, object or string are
    false; everything else — ``0`` included, as in the JMESPath specification — is true."""
    if value is None or value is False:
        return False
    if isinstance(value, str | list | dict):
        return len(value) > 0
    return True


#: The error type of an attempt whose ``when`` failed on its document.
CONDITION_ERROR = "ConditionFailed"
#: The error type of an attempt whose ``input_from`` failed on its document.
INPUT_FROM_ERROR = "InputFromFailed"


class ExpressionFailed(InvalidInput):
    """A ``when`` or ``input_from`` expression could not be evaluated on its document.

    ``error_type`` is what the attempt fails with (:data:`CONDITION_ERROR` or
    :data:`INPUT_FROM_ERROR`); ``field`` names the expression (``when``,
    ``input_from['key']``) and ``expression`` holds its text.
    """

    def __init__(self, message: str, *, field: str, expression: str,
                 error_type: str) -> None:
        super().__init__(message, field=field, expression=expression, error_type=error_type)
        self.expression = expression
        self.error_type = error_type


def _search(expr: str, doc: Mapping[str, Any], field: str, error_type: str) -> Any:
    """The one place an expression meets a document: whatever goes wrong becomes
    :class:`ExpressionFailed`, never an exception the engine's callers do not expect."""
    def failed(why: str) -> ExpressionFailed:
        return ExpressionFailed(f"{field} {expr!r} {why}"[:500], field=field,
                                expression=str(expr)[:MAX_EXPRESSION_CHARS],
                                error_type=error_type)
    try:
        parsed = compile_expression(expr)
    except ValueError as exc:  # a stored definition was validated: a caller's expression
        raise failed(str(exc)) from None
    try:
        return parsed.search(doc)
    except jexc.JMESPathError as exc:  # a function given the wrong type: length(`1`)
        raise failed(f"failed: {exc}") from None
    except Exception as exc:
        # jmespath raises plain Python errors too (`"a" > `1`` and max_by over mixed
        # types: TypeError; a very deep document: RecursionError). Pure code over data,
        # nothing else can fail here: each is the expression failing on this document.
        raise failed(f"failed on this document: {type(exc).__name__}: {exc}") from None


def evaluate_when(expr: str, doc: Mapping[str, Any]) -> bool:
    """Whether an activity with condition ``expr`` runs, given its document.

    Raises:
        ExpressionFailed: the expression is malformed or fails on this document (a
            function given a value of the wrong type, a comparison of a string with a
            number); the engine fails the attempt with ``error_type`` ConditionFailed.
    """
    return truthy(_search(expr, doc, "when", CONDITION_ERROR))


def build_input(input_from: Mapping[str, str], doc: Mapping[str, Any]) -> dict[str, Any]:
    """The keys ``input_from`` adds to an activity's input: each expression's value
    (``null`` where the document has nothing there), in the mapping's order.

    Raises:
        ExpressionFailed: an expression is malformed or fails on this document; the
            attempt fails with ``error_type`` InputFromFailed.
    """
    return {key: _search(expr, doc, f"input_from[{key!r}]", INPUT_FROM_ERROR)
            for key, expr in input_from.items()}


# -- skip propagation ----------------------------------------------------------------------

def decide(trigger: Trigger | str, upstreams: Iterable[Outcome]) -> Decision:
    """What becomes of an activity, given how its upstreams count.

    * ``all_completed``: every upstream COMPLETED → RUN; any SKIPPED → SKIP (at once:
      SKIPPED is final, so nothing can turn it into RUN); otherwise WAIT.
    * ``none_failed``: every upstream ended COMPLETED or SKIPPED, at least one
      COMPLETED → RUN; all SKIPPED → SKIP; otherwise WAIT.
    * An activity with no upstream: RUN.

    A FAILED upstream gives WAIT under both triggers: the activity never runs, and the
    run's failure path ends it (CANCELLED) as it does without conditions. Every decision
    other than WAIT is final: later outcomes of other upstreams cannot change it, so a
    redelivered record decides alike.

    Raises:
        InvalidInput: an unknown trigger.
    """
    trig = _trigger(trigger)
    seen = list(upstreams)
    if not seen:
        return Decision.RUN
    if trig is Trigger.ALL_COMPLETED:
        if Outcome.SKIPPED in seen:
            return Decision.SKIP
        return Decision.RUN if all(o is Outcome.COMPLETED for o in seen) else Decision.WAIT
    if any(o not in (Outcome.COMPLETED, Outcome.SKIPPED) for o in seen):
        return Decision.WAIT
    return Decision.RUN if Outcome.COMPLETED in seen else Decision.SKIP


def _trigger(value: Trigger | str) -> Trigger:
    try:
        return Trigger(value)
    except ValueError:
        known = ", ".join(t.value for t in Trigger)
        raise InvalidInput(f"unknown trigger {value!r} (known: {known})",
                           field="trigger") from None


def run_completes(outcomes: Iterable[Outcome]) -> bool:
    """True when a run whose activities count as given has COMPLETED: every one
    COMPLETED or SKIPPED (all SKIPPED included: nothing was asked of it)."""
    seen = list(outcomes)
    return bool(seen) and all(o in (Outcome.COMPLETED, Outcome.SKIPPED) for o in seen)
