"""Per-key pools (engine/pools.py; issue 29): which keyed pool an attempt takes.

An activity with a ``pool_key`` takes the slots and tokens of
:func:`whimbrel.contract.pools.keyed_pool` — its pool's name and the key its expression
reads from ``{"input": <run input>, "<upstream>": <output>}`` — with its pool's
settings. The key is read when the attempt is first admitted and written onto it (its
``pool_wait`` while it waits, its ``pool_slot`` once admitted), so a wake, a reconcile
visit or a replay reuses it: the run's input and the upstreams' outputs never change,
and the key is read again (the same) only when a crash lost that write. A key that reads
``null``, a list or an object, or an expression that fails on the document, fails the
attempt (``PoolKeyFailed``, its retry policy applies; a retry reads the same document,
so it fails the same way unless the definition changed).
"""

from __future__ import annotations

from functools import lru_cache

from whimbrel.contract.conditions import INPUT_KEY, document, expression_problem
from whimbrel.contract.definitions import ActivityDefinition, WorkflowDefinition
from whimbrel.contract.errors import StateConflict
from whimbrel.contract.payloads import decode_payload
from whimbrel.contract.pools import (
    POOL_KEY_ERROR,
    PoolKeyFailed,
    base_pool,
    evaluate_pool_key,
    is_keyed_pool,
    keyed_pool,
    parse_slot_ref,
)
from whimbrel.contract.records import REMOVE, ActivityRecord, WorkflowRecord
from whimbrel.contract.states import ActivityState, Transition
from whimbrel.engine.feature import Admission, Core

__all__ = ["PoolKeyFailed", "attempt_pool", "fail_keyless", "keyless", "lost_pool"]


def _recorded(spec_pool: str, ref: str | None) -> str | None:
    """The keyed pool ``ref`` (a ``pool_wait`` or ``pool_slot``) names, if it is one of
    ``spec_pool``'s."""
    if not ref:
        return None
    pool = parse_slot_ref(ref)[0] if "#" in ref else ref
    return pool if is_keyed_pool(pool) and base_pool(pool) == spec_pool else None


@lru_cache(maxsize=256)
def _reads_upstream(expr: str) -> bool:
    """Whether ``expr`` reads a name besides ``input`` (analysed once per expression)."""
    return expression_problem(expr, {INPUT_KEY}) is not None


def attempt_pool(core: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
                 spec: ActivityDefinition, item: ActivityRecord) -> str:
    """The pool whose slots ``item`` takes: its activity's pool, or with a ``pool_key``
    the keyed pool it recorded, else the one its key reads now.

    Raises:
        PoolKeyFailed: the key reads nothing usable (the attempt is to fail).
    """
    assert spec.pool is not None
    if spec.pool_key is None:
        return spec.pool
    known = _recorded(spec.pool, item.pool_slot) or _recorded(spec.pool, item.pool_wait)
    if known is not None:
        return known
    # The upstreams' outputs are read (a Query of the run) only when the key reads one.
    outputs = core.inputs.upstream_values(wf.workflow_exec_id, defn, item.activity_name)[0] \
        if spec.depends_on and _reads_upstream(spec.pool_key) else {}
    doc = document(decode_payload(core.reads.run_input(wf), field="input"), outputs)
    return keyed_pool(spec.pool, evaluate_pool_key(spec.pool_key, doc))


def fail_keyless(core: Core, aeid: str, defn: WorkflowDefinition, why: str) -> bool:
    """Fail a held attempt whose ``pool_key`` read no key (READY → RUNNING → FAILED in
    one write, error type ``PoolKeyFailed``; its retry policy applies): whether it did.
    A replay finds it moved and does nothing."""
    item = core.store.get_activity(aeid)
    if item is None or item.state is not ActivityState.READY or item.pool_slot is not None:
        return False
    try:
        core.moves.end_wait(item, defn, Transition.FAILED, error=why,
                            error_type=POOL_KEY_ERROR)
    except StateConflict:
        return False  # moved meanwhile (cancelled): nothing to fail
    return True


def keyless(core: Core, defn: WorkflowDefinition, spec: ActivityDefinition, aeid: str,
            exc: PoolKeyFailed) -> Admission:
    """The admission of an attempt whose key reads nothing: held READY (out of the
    claimable index, ``pool_wait`` its pool's name, which no keyed attempt waits in),
    then failed. A crash between the two writes leaves it held; its run's reconcile
    visit reads the key again and fails it."""
    def landed(_rec: ActivityRecord) -> None:
        fail_keyless(core, aeid, defn, str(exc))

    return Admission(False, {"pool_wait": spec.pool, "claimable": REMOVE}, landed=landed)


def lost_pool(core: Core, wf: WorkflowRecord, defn: WorkflowDefinition,
              item: ActivityRecord) -> str | None:
    """The pool whose slot a vanished attempt may hold (its LOST tombstone records none):
    its activity's pool, or, keyed, the key its run's documents read (None: no pool, or
    no key — it never held one)."""
    spec = defn.activity(item.activity_name)
    if spec.pool is None:
        return None
    try:
        return attempt_pool(core, wf, defn, spec, item)
    except PoolKeyFailed:
        return None
