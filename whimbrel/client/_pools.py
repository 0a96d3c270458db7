"""Pools on the public facade (mixed into :class:`whimbrel.Whimbrel`);
docs/definitions.md, "Pools"."""

from __future__ import annotations

from whimbrel.contract.pools import Pool, PoolInfo
from whimbrel.engine import Engine
from whimbrel.engine import Pools as PoolFeature


class Pools:
    """Named pools: slots and rates shared by activities of any definitions."""

    engine: Engine

    @property
    def _pools(self) -> PoolFeature:
        return self.engine.feature(PoolFeature)

    def set_pool(self, name: str, *, slots: int | None,
                 per_second: float | None) -> PoolInfo:
        """Create or change the pool ``name``: at most ``slots`` of its attempts hold a
        slot at once (RUNNING, or QUEUED/PREPARING on their way; a pull attempt from the
        moment it is claimable), and at most ``per_second`` start per second (a burst of
        one second's worth). None is no limit of that kind; ``slots=0`` closes it.
        Raising a limit lets waiting attempts in at once; lowering it lets held slots
        drain. Other processes see a change within 5 seconds.

        Raises:
            InvalidInput: a bad name (letters, digits, ``_``, ``-``), negative or
                non-integer slots, a rate that is not a number above 0; nothing is
                written.
        """
        return self._pools.set_pool(Pool(name, slots, per_second))

    def get_pool(self, name: str) -> PoolInfo:
        """The pool's settings, how many slots are held now (``in_use``) and how many
        attempts (or runs) wait for it (``waiting``).

        Raises:
            PoolNotFound: no such pool.
            InvalidInput: a bad name.
        """
        return self._pools.get_pool(name)

    def list_pools(self) -> list[PoolInfo]:
        """Every pool's settings, by name."""
        return self._pools.list_pools()
