"""The expression grammar of DynamoDB, parsed by recursive descent into small tuples.

Condition (also filter and key condition) expressions, update expressions and
projection expressions, with ``ExpressionAttributeNames``/``Values`` substituted while
parsing and their use recorded (DynamoDB refuses a request that defines a name or value
it does not use, or uses one it does not define).

Trees (plain tuples, cheap to build and walk):

* a path is a tuple of attribute names (``str``) and list indexes (``int``);
* an operand is ``("path", path)``, ``("value", av)``, ``("size", path)``,
  ``("if_not_exists", path, operand)``, ``("list_append", a, b)``, ``("+", a, b)`` or
  ``("-", a, b)``;
* a condition is ``("cmp", op, a, b)``, ``("between", a, low, high)``,
  ``("in", a, operands)``, ``("and", c, c)``, ``("or", c, c)``, ``("not", c)`` or
  ``("fn", name, args)`` for the functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from whimbrel.store.memory.names import Names
from whimbrel.store.memory.reserved import RESERVED
from whimbrel.store.memory.values import DynamoError, invalid, sort_key

__all__ = ["Names", "Update", "parse_condition", "parse_projection", "parse_update"]

_TOKEN = re.compile(r"\s*(?:(?P<name>#[A-Za-z0-9_]+)|(?P<value>:[A-Za-z0-9_]+)"
                    r"|(?P<num>\d+)|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
                    r"|(?P<op><>|<=|>=|[=<>()\[\],.+\-]))")
_COMPARATORS = ("=", "<>", "<", "<=", ">", ">=")
_FUNCTIONS = ("attribute_exists", "attribute_not_exists", "attribute_type", "begins_with",
              "contains", "size")
_KEYWORDS = frozenset({"AND", "OR", "NOT", "BETWEEN", "IN"})
_CLAUSES = ("SET", "REMOVE", "ADD", "DELETE")


class _Parser:
    def __init__(self, kind: str, text: str, names: Names) -> None:
        self.kind, self.text, self.names = kind, text, names
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None:
                if not text[pos:].strip():
                    break
                raise self.error(f"Invalid character encountered; token: "
                                 f"\"{text[pos:].strip()[:1]}\", near: \"{text[pos:pos + 8]}\"")
            group = match.lastgroup or ""
            self.tokens.append((group, match.group(group)))
            pos = match.end()
        self.at = 0

    def error(self, message: str) -> DynamoError:
        return invalid(f"Invalid {self.kind}: {message}")

    def peek(self, offset: int = 0) -> tuple[str, str]:
        i = self.at + offset
        return self.tokens[i] if i < len(self.tokens) else ("end", "")

    def word(self, offset: int = 0) -> str:
        kind, text = self.peek(offset)
        return text.upper() if kind == "word" else ""

    def take(self, text: str) -> None:
        got = self.peek()[1]
        if got.upper() != text.upper():
            near = got or "<EOF>"
            raise self.error(f"Syntax error; token: \"{near}\", near: \"{text}\"")
        self.at += 1

    def done(self) -> None:
        if self.at < len(self.tokens):
            raise self.error(f"Syntax error; token: \"{self.peek()[1]}\", near: "
                             f"\"{self.peek()[1]}\"")

    # -- paths and operands -------------------------------------------------------------

    def path(self) -> tuple[str | int, ...]:
        parts: list[str | int] = [self.attribute()]
        while True:
            kind, text = self.peek()
            if text == ".":
                self.at += 1
                parts.append(self.attribute())
            elif text == "[":
                self.at += 1
                kind, number = self.peek()
                if kind != "num":
                    raise self.error(f"Syntax error; token: \"{number}\", near: \"[{number}\"")
                self.at += 1
                self.take("]")
                parts.append(int(number))
            else:
                return tuple(parts)

    def attribute(self) -> str:
        kind, text = self.peek()
        if kind == "name":
            self.at += 1
            return self.names.name(text)
        if kind == "word" and text.upper() not in _KEYWORDS:
            self.at += 1
            if text.upper() in RESERVED:
                raise self.error("Attribute name is a reserved keyword; reserved keyword: "
                                 f"{text}")
            return text
        raise self.error(f"Syntax error; token: \"{text or '<EOF>'}\", near: \"{text}\"")

    def operand(self) -> tuple[Any, ...]:
        kind, text = self.peek()
        if kind == "value":
            self.at += 1
            return ("value", self.names.value(text))
        if kind == "word" and self.peek(1)[1] == "(":
            if text == "size":
                self.at += 2
                path = self.path()
                self.take(")")
                return ("size", path)
            if text in ("if_not_exists", "list_append") and self.kind == "UpdateExpression":
                self.at += 2
                first = self.path() if text == "if_not_exists" else self.set_operand()
                self.take(",")
                second = self.set_operand()
                self.take(")")
                if text == "if_not_exists":
                    return ("if_not_exists", first, second)
                for side in (first, second):
                    self.literal_type(side, "list_append", ("L",))
                return ("list_append", first, second)
            raise self.error(f"Invalid function name; function: {text}")
        return ("path", self.path())

    # -- conditions ---------------------------------------------------------------------

    def condition(self) -> tuple[Any, ...]:
        left = self.conjunction()
        while self.word() == "OR":
            self.at += 1
            left = ("or", left, self.conjunction())
        return left

    def conjunction(self) -> tuple[Any, ...]:
        left = self.negation()
        while self.word() == "AND":
            self.at += 1
            left = ("and", left, self.negation())
        return left

    def negation(self) -> tuple[Any, ...]:
        if self.word() == "NOT":
            self.at += 1
            return ("not", self.negation())
        return self.primary()

    def primary(self) -> tuple[Any, ...]:
        kind, text = self.peek()
        if text == "(":
            self.at += 1
            inner = self.condition()
            self.take(")")
            return inner
        if kind == "word" and self.peek(1)[1] == "(" and text in _FUNCTIONS and text != "size":
            self.at += 2
            args: list[Any] = [self.operand()]
            while self.peek()[1] == ",":
                self.at += 1
                args.append(self.operand())
            self.take(")")
            return self.function(text, args)
        left = self.operand()
        op = self.peek()[1]
        if op in _COMPARATORS:
            self.at += 1
            right = self.operand()
            if right == left and left[0] != "value":
                raise self.error("The first operand must be distinct from the remaining "
                                 f"operands for this operator or function; operator: {op}, "
                                 f"first operand: {_show_operand(left)}")
            if op not in ("=", "<>"):
                for side in (left, right):
                    self.literal_type(side, op, ("N", "S", "B"))
            return ("cmp", op, left, right)
        if self.word() == "BETWEEN":
            self.at += 1
            low = self.operand()
            self.take("AND")
            high = self.operand()
            for side in (left, low, high):
                self.literal_type(side, "BETWEEN", ("N", "S", "B"))
            if low[0] == high[0] == "value" and next(iter(low[1])) != next(iter(high[1])):
                raise self.error("The BETWEEN operator requires same data type for lower and "
                                 f"upper bounds; lower bound operand: AttributeValue: {low[1]}, "
                                 f"upper bound operand: AttributeValue: {high[1]}")
            if low[0] == high[0] == "value" and _descending(low[1], high[1]):
                raise self.error("The BETWEEN operator requires upper bound to be greater than "
                                 "or equal to lower bound; lower bound operand: AttributeValue: "
                                 f"{low[1]}, upper bound operand: AttributeValue: {high[1]}")
            return ("between", left, low, high)
        if self.word() == "IN":
            self.at += 1
            self.take("(")
            options = [self.operand()]
            while self.peek()[1] == ",":
                self.at += 1
                options.append(self.operand())
            self.take(")")
            if len(options) > 100:
                raise self.error("The IN operator is provided with too many operands; "
                                 f"number of operands: {len(options)}")
            return ("in", left, options)
        raise self.error(f"Syntax error; token: \"{op or '<EOF>'}\", near: \"{op}\"")

    def function(self, name: str, args: list[Any]) -> tuple[Any, ...]:
        arity = 1 if name in ("attribute_exists", "attribute_not_exists") else 2
        if len(args) != arity:
            raise self.error(f"Incorrect number of operands for operator or function; "
                             f"operator or function: {name}, number of operands: {len(args)}")
        if args[0][0] != "path":
            raise self.error(f"Operator or function requires a document path; operator or "
                             f"function: {name}")
        if name in ("begins_with", "contains") and args[1] == args[0]:
            raise self.error("The first operand must be distinct from the remaining operands "
                             f"for this operator or function; operator: {name}, first "
                             f"operand: {_show_operand(args[0])}")
        if name == "begins_with":
            self.literal_type(args[1], name, ("S", "B"))
        if name == "attribute_type":
            kind = args[1][1] if args[1][0] == "value" else None
            if not kind or "S" not in kind or kind["S"] not in (
                    "S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS"):
                raise self.error(f"Invalid attribute type name found; type: {kind}, valid "
                                 "types: { B,NULL,SS,BOOL,L,BS,N,NS,S,M }")
        return ("fn", name, args)

    # -- updates ------------------------------------------------------------------------

    def set_operand(self) -> tuple[Any, ...]:
        return self.operand()

    def set_value(self) -> tuple[Any, ...]:
        left = self.set_operand()
        op = self.peek()[1]
        if op in ("+", "-"):
            self.at += 1
            right = self.set_operand()
            for side in (left, right):
                self.literal_type(side, op, ("N",))
            return (op, left, right)
        return left

    def literal_type(self, node: tuple[Any, ...], operator: str,
                     allowed: tuple[str, ...]) -> None:
        """A literal operand of the wrong type is refused before anything is read."""
        if node[0] == "value" and next(iter(node[1])) not in allowed:
            raise self.error("Incorrect operand type for operator or function; operator or "
                             f"function: {operator}, operand type: {next(iter(node[1]))}")

    def update(self) -> Update:
        result = Update()
        while self.at < len(self.tokens):
            clause = self.word()
            if clause not in _CLAUSES:
                raise self.error(f"Syntax error; token: \"{self.peek()[1]}\", near: "
                                 f"\"{self.peek()[1]}\"")
            if clause in result.seen:
                raise self.error(f"The \"{clause}\" section can only be used once in an "
                                 "update expression;")
            result.seen.add(clause)
            self.at += 1
            while True:
                path = self.path()
                if clause == "SET":
                    self.take("=")
                    result.sets.append((path, self.set_value()))
                elif clause == "REMOVE":
                    result.removes.append(path)
                else:
                    kind, text = self.peek()
                    if kind != "value":
                        raise self.error(f"Syntax error; token: \"{text}\", near: \"{text}\"")
                    self.at += 1
                    target = result.adds if clause == "ADD" else result.deletes
                    value = self.names.value(text)
                    self.literal_type(("value", value), clause,
                                      ("N", "SS", "NS", "BS") if clause == "ADD"
                                      else ("SS", "NS", "BS"))
                    target.append((path, value))
                if self.peek()[1] != ",":
                    break
                self.at += 1
        if not result.seen:
            raise self.error("The expression can not be empty;")
        return result


@dataclass
class Update:
    """A parsed update expression: its actions by clause."""

    sets: list[tuple[tuple[str | int, ...], tuple[Any, ...]]] = field(default_factory=list)
    removes: list[tuple[str | int, ...]] = field(default_factory=list)
    adds: list[tuple[tuple[str | int, ...], dict[str, Any]]] = field(default_factory=list)
    deletes: list[tuple[tuple[str | int, ...], dict[str, Any]]] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    def paths(self) -> list[tuple[str | int, ...]]:
        return ([p for p, _ in self.sets] + list(self.removes) + [p for p, _ in self.adds]
                + [p for p, _ in self.deletes])


def _empty(kind: str, text: str | None) -> None:
    if text is not None and not text.strip():
        raise invalid(f"Invalid {kind}: The expression can not be empty;")


def parse_condition(text: str, names: Names,
                    kind: str = "ConditionExpression") -> tuple[Any, ...]:
    _empty(kind, text)
    parser = _Parser(kind, text, names)
    tree = parser.condition()
    parser.done()
    return tree


def parse_update(text: str, names: Names) -> Update:
    _empty("UpdateExpression", text)
    parser = _Parser("UpdateExpression", text, names)
    update = parser.update()
    paths = update.paths()
    for i, one in enumerate(paths):
        for two in paths[i + 1:]:
            if one[:len(two)] == two or two[:len(one)] == one:
                raise invalid("Invalid UpdateExpression: Two document paths overlap with each "
                              f"other; must remove or rewrite one of these paths; path one: "
                              f"{_show(one)}, path two: {_show(two)}")
    return update


def parse_projection(text: str, names: Names) -> list[tuple[str | int, ...]]:
    _empty("ProjectionExpression", text)
    parser = _Parser("ProjectionExpression", text, names)
    paths = [parser.path()]
    while parser.peek()[1] == ",":
        parser.at += 1
        paths.append(parser.path())
    parser.done()
    return paths


def _show_operand(node: tuple[Any, ...]) -> str:
    return _show(node[1]) if node[0] == "path" else str(node[1])


def _descending(low: dict[str, Any], high: dict[str, Any]) -> bool:
    """Whether two literal bounds of one orderable type are the wrong way round."""
    kind = next(iter(low))
    if kind != next(iter(high)) or kind not in ("N", "S", "B"):
        return False
    return bool(sort_key(low) > sort_key(high))


def _show(path: tuple[str | int, ...]) -> str:
    return "[" + ", ".join(f"[{p}]" if isinstance(p, int) else p for p in path) + "]"
