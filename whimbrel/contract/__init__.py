"""The pure contract: states, transitions, definitions, ids, limits. No I/O."""

# A code workflow's definition is a WorkflowDefinition stored with a key of its own
# (``code``); importing it here registers it before any definition is read.
from whimbrel.contract.code import definition as _code_definition  # noqa: F401
