"""``python -m whimbrel.engine``: which features take each hook, and how it is asked
(the table docs/architecture.md's hook table is tested against)."""

from whimbrel.engine.engine import FEATURES
from whimbrel.engine.hooks import describe

print(describe(make for make in FEATURES if isinstance(make, type)))
