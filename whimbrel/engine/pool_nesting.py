"""Child runs that would wait for what their parent holds (engine/pools.py; issue 31).

A ``workflow`` launcher's attempt holds its pool's slot for as long as its child run
runs. If an activity of that child (or of a run the child starts, at any depth) needs a
slot of the same pool, a full pool is held by parents whose children wait for it: none
ever ends. The same holds for ``max_running``: a run holds one of its definition's run
slots while its child of the same definition name (a pinned older version: a cycle
by name is refused already, engine/children.py) waits QUEUED for one.

Registration refuses both, read from the registered definitions the new one reaches
(each child's latest version, or the one its launcher pins), for pools that have
``slots`` (a rate alone never deadlocks: its tokens come back with time). What
registration cannot see — a child definition changed afterwards, ``slots`` given to the
pool later — is caught when a child run's attempt would wait for a pool its ancestor's
attempt holds: it fails at once (``PoolDeadlock``, :func:`fail_nested`) instead of
waiting for good; its retry policy applies, and the parent's attempt then fails with
its child and gives its slot back. A child run that would wait QUEUED for the run slots
of its own name that an ancestor holds is not started (:class:`PoolDeadlock`): the
parent's attempt fails.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import DefinitionNotFound, NotAllowedNow, StateConflict
from whimbrel.contract.nesting import CHILD_LAUNCHER, ChildRef
from whimbrel.contract.pools import PoolInfo, parse_slot_ref
from whimbrel.contract.records import WorkflowRecord
from whimbrel.contract.states import ActivityState, Transition
from whimbrel.engine.feature import Core

#: Definitions a registration reads at most while it follows child launchers.
MAX_REACHED = 200

Find = Callable[[str, int | None], WorkflowDefinition]


def child_ref(config: Mapping[str, Any]) -> ChildRef:
    """The child a ``workflow`` launcher's config starts (as ``child_workflows``)."""
    version = config.get("version")
    return str(config["workflow"]), None if version is None else int(version)


class _Tree:
    """The registered definitions reachable from one being registered, read once each."""

    def __init__(self, find: Find) -> None:
        self._find = find
        self._defs: dict[ChildRef, WorkflowDefinition | None] = {}
        self._below: dict[ChildRef, tuple[dict[str, str], set[str]]] = {}

    def get(self, ref: ChildRef) -> WorkflowDefinition | None:
        if ref not in self._defs:
            if len(self._defs) >= MAX_REACHED:
                return None
            try:
                self._defs[ref] = self._find(*ref)
            except DefinitionNotFound:
                self._defs[ref] = None  # not registered (yet): it starts nothing
        return self._defs[ref]

    def under(self, ref: ChildRef, path: frozenset[ChildRef] = frozenset()
              ) -> tuple[dict[str, str], set[str]]:
        """What a child run of ``ref`` and its own children use: each pool, with who
        uses it first, and every definition name."""
        if ref in self._below:
            return self._below[ref]
        pools: dict[str, str] = {}
        names: set[str] = set()
        defn = self.get(ref)
        if defn is not None and ref not in path:  # a cycle is refused elsewhere
            names.add(defn.name)
            for spec in defn.activities:
                if spec.pool is not None:
                    pools.setdefault(spec.pool, f"activity {spec.name!r} of {defn.name!r}")
            for spec in defn.activities:
                if spec.launcher.kind == CHILD_LAUNCHER:
                    more, more_names = self.under(child_ref(spec.launcher.config), path | {ref})
                    for pool, who in more.items():
                        pools.setdefault(pool, who)
                    names |= more_names
        self._below[ref] = pools, names
        return pools, names


def nesting_problems(defn: WorkflowDefinition, find: Find,
                     settings: Callable[[str], PoolInfo | None]) -> list[str]:
    """Why ``defn`` would start runs that wait for what their parents hold (empty: none)."""
    tree = _Tree(find)
    out: list[str] = []
    for spec in defn.activities:
        if spec.launcher.kind != CHILD_LAUNCHER:
            continue
        ref = child_ref(spec.launcher.config)
        pools, names = tree.under(ref)
        if spec.pool is not None and spec.pool in pools:
            info = settings(spec.pool)
            if info is not None and info.slots is not None:
                out.append(
                    f"activity {spec.name!r} holds a slot of pool {spec.pool!r} while its "
                    f"child run of {ref[0]!r} runs, and {pools[spec.pool]} waits for one: "
                    "a full pool would never free (deadlock); put the launcher in no "
                    "pool or another one")
        if defn.max_running and defn.name in names:
            out.append(
                f"activity {spec.name!r} starts a child run of {defn.name!r} (version "
                f"{ref[1] if ref[1] is not None else 'latest'}), which waits for one of "
                f"the max_running={defn.max_running} run slots its parent holds: "
                "deadlock; start another definition, or drop max_running")
    return out


#: The error type of an attempt failed because it would wait for a slot its parent holds.
POOL_DEADLOCK = "PoolDeadlock"
#: Ancestors looked at, at most (runs nest far less deep: contract/nesting.py).
MAX_ANCESTORS = 32


def held_above(core: Core, wf: WorkflowRecord, pool: str) -> str | None:
    """The attempt of an ancestor run of ``wf`` that holds a slot of ``pool`` (its id),
    or None: ``wf`` is no child run, or none of its ancestors holds one."""
    parent = wf.parent_activity_exec_id
    for _ in range(MAX_ANCESTORS):
        if parent is None:
            return None
        item = core.store.get_activity(parent)
        if item is None:
            return None
        if item.pool_slot is not None and parse_slot_ref(item.pool_slot)[0] == pool \
                and parse_slot_ref(item.pool_slot)[1] is not None:
            return item.activity_exec_id
        run = core.store.get_workflow(item.workflow_exec_id)
        parent = run.parent_activity_exec_id if run is not None else None
    return None


def fail_nested(core: Core, aeid: str, defn: WorkflowDefinition, pool: str,
                holder: str) -> None:
    """Fail a waiting attempt whose ancestor's ``holder`` holds the slot of ``pool`` it
    would wait for (READY → RUNNING → FAILED in one write; its retry policy applies):
    what registration refuses, when only the run shows it (a child definition changed
    since, ``slots`` given to the pool since)."""
    item = core.store.get_activity(aeid)
    if item is None or item.state is not ActivityState.READY or item.pool_slot is not None:
        return
    error = (f"it would wait for a slot of pool {pool!r} that its parent's attempt "
             f"{holder} holds while this run runs: a full pool would never free "
             "(deadlock); put the child-run launcher in no pool or another one")
    try:
        core.moves.end_wait(item, defn, Transition.FAILED, error=error,
                       error_type=POOL_DEADLOCK)
    except StateConflict:
        return  # moved meanwhile (admitted, cancelled): nothing to fail


class PoolDeadlock(NotAllowedNow):
    """A child run would wait QUEUED for one of the ``max_running`` run slots an ancestor
    run of the same name holds (all held): its start is refused, so the parent's attempt
    fails (its retry policy applies) instead of waiting for good."""

    def __init__(self, *, workflow_name: str, holder: str, max_running: int) -> None:
        super().__init__(
            f"a child run of {workflow_name!r} would wait for one of its max_running="
            f"{max_running} run slots, which its ancestor run {holder} holds (all are "
            "held): deadlock; start another definition, or drop max_running",
            workflow_name=workflow_name, holder=holder)


def run_held_above(core: Core, wf: WorkflowRecord) -> str | None:
    """The ancestor run of ``wf`` of the same name that holds one of its run slots (its
    id), or None."""
    parent = wf.parent_activity_exec_id
    for _ in range(MAX_ANCESTORS):
        if parent is None:
            return None
        item = core.store.get_activity(parent)
        run = core.store.get_workflow(item.workflow_exec_id) if item is not None else None
        if run is None:
            return None
        if run.workflow_name == wf.workflow_name and run.pool_slot is not None:
            return run.workflow_exec_id
        parent = run.parent_activity_exec_id
    return None
