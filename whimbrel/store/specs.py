"""Every table, index and stream Whimbrel uses, described once: ``create_tables()`` and
the CDK construct (``infra/``) read this module; nothing else spells a key or an index
name. Why the keys are what they are: ``docs/architecture.md``; the streams' consumers:
:mod:`whimbrel.store.consumers`.

The descriptions are split by what they describe: the vocabulary, the keys and the core's
tables (:mod:`whimbrel.store.spec_core`, which the store's own modules read) and each
feature's tables, declared by that feature's store part (``Part.TABLES`` in
``whimbrel/store/parts/``). This module gathers them: callers outside the store read
every spec from here, and :data:`TABLES` lists every table once — the core's, then each
part's, found by :func:`whimbrel.store.part.parts` — so a new part's table needs no line
here.
"""

from __future__ import annotations

from whimbrel.store.part import parts
from whimbrel.store.parts.leases import LEASE
from whimbrel.store.parts.notifications import NOTIFICATION, NOTIFICATION_RETENTION_SECONDS
from whimbrel.store.parts.pools import POOL
from whimbrel.store.parts.schedules import SCHEDULE
from whimbrel.store.parts.signals import SIGNAL
from whimbrel.store.spec_core import *  # noqa: F403 - this module re-exports the vocabulary
from whimbrel.store.spec_core import CORE_TABLES, TableSpec
from whimbrel.store.spec_core import __all__ as _CORE_NAMES

# The parts' tables that were named here before the parts declared them stay importable
# by name (infra/whimbrel_infra/access.py grants by them); a new part's table needs no
# line here: it is in TABLES, and ``table_spec(name)`` finds it.
__all__ = [*_CORE_NAMES, "LEASE", "NOTIFICATION", "NOTIFICATION_RETENTION_SECONDS", "POOL",
           "SCHEDULE", "SIGNAL", "TABLES", "table_spec"]

#: Every table: the core's, then the parts' (``whimbrel/store/parts/``, by module name).
TABLES: tuple[TableSpec, ...] = CORE_TABLES + tuple(
    spec for part in parts() for spec in part.TABLES)


def table_spec(logical_name: str) -> TableSpec:
    """The table whose logical name (``TableSpec.logical_name``) is ``logical_name``.

    Raises:
        KeyError: no table has that name.
    """
    for spec in TABLES:
        if spec.logical_name == logical_name:
            return spec
    raise KeyError(logical_name)
