"""A store part with tables of its own, and how the store finds every part.

A feature whose rows live in a table of their own has one part: a module in
``whimbrel/store/parts/`` holding one :class:`Part` subclass that declares the tables it
owns (``TABLES``) and the port of the engine it implements (``PORT``: that protocol's
class name, e.g. ``"PoolPort"`` — the store cannot import the engine, a layer above it).
:func:`parts` imports every module of that package, so the part is found without a line
elsewhere: ``specs.TABLES`` (``create_tables()``, the CDK construct, the billing and the
test fixtures) lists its tables, and ``Store.part(PoolPort)`` returns the store's one
instance of it. The port's own module checks, for mypy, that the part implements it.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import TYPE_CHECKING, ClassVar

from whimbrel.store.spec_types import TableSpec

if TYPE_CHECKING:
    from whimbrel.store.attempts import Attempts
    from whimbrel.store.plumbing import Tables

__all__ = ["PARTS_PACKAGE", "Part", "parts"]

#: Where the parts live: every module of this package is imported by :func:`parts`.
PARTS_PACKAGE = "whimbrel.store.parts"


class Part:
    """The tables of one feature. Holds the store's one ``Tables``; inherits nothing else.

    Attributes:
        PORT: the class name of the engine's protocol this part implements.
        TABLES: the tables this part owns, described once (``specs.TABLES`` gathers them).
    """

    PORT: ClassVar[str]
    TABLES: ClassVar[tuple[TableSpec, ...]]

    def __init__(self, tables: Tables, attempts: Attempts) -> None:
        self.tables = tables
        #: The attempts part, for a part whose write also moves an attempt (pools).
        self.attempts = attempts


@cache
def parts() -> tuple[type[Part], ...]:
    """Every part, found once per process: the ``Part`` subclass defined in each module
    of :data:`PARTS_PACKAGE`, in the order of the modules' names.

    Raises:
        TypeError: a module there defines no part or two, or two parts claim one port.
    """
    package = importlib.import_module(PARTS_PACKAGE)
    found: list[type[Part]] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{PARTS_PACKAGE}.{info.name}")
        mine = [v for v in vars(module).values() if isinstance(v, type)
                and issubclass(v, Part) and v is not Part and v.__module__ == module.__name__]
        if len(mine) != 1:
            raise TypeError(f"{module.__name__} must define exactly one Part subclass, "
                            f"found {[c.__name__ for c in mine]}")
        found.append(mine[0])
    ports = [cls.PORT for cls in found]
    if len(set(ports)) != len(ports):
        raise TypeError(f"two store parts implement one port: {sorted(ports)}")
    return tuple(found)
