"""One request's ``ExpressionAttributeNames`` and ``ExpressionAttributeValues``, and which
of them its expressions used: DynamoDB refuses a request that defines a name or value it
does not use, or uses one it does not define."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from whimbrel.store.memory.values import invalid, validate_value

__all__ = ["Names"]


@dataclass
class Names:
    """One request's ``ExpressionAttributeNames``/``Values`` and which were used."""

    names: Mapping[str, str] = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)
    used_names: set[str] = field(default_factory=set)
    used_values: set[str] = field(default_factory=set)

    def name(self, token: str) -> str:
        if token not in self.names:
            raise invalid("An expression attribute name used in the document path is not "
                          f"defined; attribute name: {token}")
        self.used_names.add(token)
        return str(self.names[token])

    def value(self, token: str) -> dict[str, Any]:
        if token not in self.values:
            raise invalid("An expression attribute value used in expression is not defined; "
                          f"attribute value: {token}")
        self.used_values.add(token)
        return validate_value(self.values[token], token)

    def check_all_used(self) -> None:
        """ValidationException for a name or value defined but unused."""
        unused_names = sorted(set(self.names) - self.used_names)
        if unused_names:
            raise invalid("Value provided in ExpressionAttributeNames unused in expressions: "
                          f"keys: {{{', '.join(unused_names)}}}")
        unused_values = sorted(set(self.values) - self.used_values)
        if unused_values:
            raise invalid("Value provided in ExpressionAttributeValues unused in expressions: "
                          f"keys: {{{', '.join(unused_values)}}}")
