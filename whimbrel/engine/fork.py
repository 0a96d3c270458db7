"""Fork: a new run of a run's definition that keeps what did not depend on a chosen
activity and runs that activity and everything after it again (``fork_workflow``,
``whimbrel fork RUN --from ACTIVITY``; Temporal's reset, DBOS's fork, Airflow's clear).

Every activity that neither is ``from_activity`` nor (transitively) depends on it, and
whose latest attempt in the source COMPLETED, gets its first attempt created COMPLETED
with the source's output, its history naming the attempt it reuses (``reused:<id>``): it
never runs. Those rows are written first; then the new run's item, RUNNING, with
``forked_from`` naming its source. Everything else is started the way a redrive starts
what did not complete (engine/redrive.py): the new run is generation 1 with
``redrive_ready`` behind it, the fan-in edges towards what runs again first, then the
new attempts, then the launch of those whose upstreams are all resolved. A crash after
the run's item is written is finished by the run's first reconcile visit (the
redrive's ``finish_start``; ``roots_ready`` is on the item from its creation, so no
start repair creates a root the fork reused), or at once by the same call again (same
``request_id``), which makes that visit; a crash before it, by the same call again.
Maps, child runs and failure handlers are never reused: they run again.

A code run is forked from a step ``name#k`` (engine/fork_code.py): its completed steps
before that one are the reused attempts, and the new run's first decision replays its
code over them (the redrive's follow-ups of a code run make that decision).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from whimbrel.contract import attributes as run_attributes
from whimbrel.contract import checks
from whimbrel.contract.code.definition import CodeDefinition
from whimbrel.contract.dataflow import handlers
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import InvalidInput, NotAllowedNow
from whimbrel.contract.ids import activity_exec_id, new_request_id, workflow_exec_id_for
from whimbrel.contract.limits import MAX_INPUT_BYTES
from whimbrel.contract.payloads import encode_payload
from whimbrel.contract.records import (
    ActivityRecord,
    Change,
    RequestRecord,
    WorkflowRecord,
    day_of,
    latest_of,
)
from whimbrel.contract.states import ActivityState, WorkflowState
from whimbrel.engine import fork_code, rules
from whimbrel.engine.admission import admission
from whimbrel.engine.engine import Engine
from whimbrel.engine.feature import Feature
from whimbrel.engine.redrive import Redrive
from whimbrel.engine.sweep import reconcile

A = ActivityState
W = WorkflowState
#: The actor a reused attempt's history names: ``reused:<source attempt id>``.
REUSED = "reused:"


def rerun_set(defn: WorkflowDefinition, from_activity: str) -> frozenset[str]:
    """``from_activity`` and every activity after it."""
    return frozenset({from_activity}) | defn.downstream_closure(from_activity)


def reusable(defn: WorkflowDefinition, latest: dict[str, ActivityRecord],
             from_activity: str) -> dict[str, ActivityRecord]:
    """The source attempts a fork keeps, by activity: COMPLETED, not after
    ``from_activity``, and neither a map, a child run nor a failure handler."""
    again = rerun_set(defn, from_activity)
    called = handlers(defn)
    out = {}
    for spec in defn.activities:
        act = latest.get(spec.name)
        if spec.name in again or spec.name in called or act is None \
                or act.state is not A.COMPLETED or act.map_size is not None \
                or spec.map_over is not None or spec.launcher.kind == "workflow":
            continue
        out[spec.name] = act
    return out


def fork(engine: Engine, source: str, *, from_activity: str, input: Any = None,
         version: int | None = None, request_id: str | None = None,
         actor: str | None = None) -> str:
    """Start the fork of run ``source`` from ``from_activity`` (of a code run: a step
    ``name#k``); returns its execution id. Idempotent for one ``request_id`` (a new one
    when None).

    Raises:
        WorkflowNotFound: no run ``source``.
        DefinitionNotFound: no such ``version`` of its definition.
        InvalidInput: ``from_activity`` is not an activity of the definition (of a code
            run: not a step it has), a bad input, or ``request_id`` already used for
            another run.
        NotAllowedNow: ``max_running`` runs of the definition are running.
    """
    checks.text(source, "workflow_exec_id")
    checks.text(from_activity, "from_activity")
    src = engine.reads.workflow(source)
    version, defn = engine.definitions.definition(src.workflow_name,
                                      src.version if version is None else version)
    code = isinstance(defn, CodeDefinition)
    if not code and from_activity not in defn.names:
        raise InvalidInput(
            f"workflow {src.workflow_name!r} version {version} has no activity "
            f"{from_activity!r}; its activities: {', '.join(defn.names)}" + (
                " ('<name>#<k>' names a step of a code workflow's run)"
                if "#" in from_activity else ""), field="from_activity")
    payload = engine.reads.run_input(src) if input is None else encode_payload(
        input, field="input", max_bytes=MAX_INPUT_BYTES)
    rows = engine.store.list_activities(source)
    kept = fork_code.kept_steps(src, rows, from_activity) if code else \
        reusable(defn, latest_of(rows), from_activity)
    request_id = new_request_id() if request_id is None else request_id
    wx = workflow_exec_id_for(request_id)
    now = engine.clock()
    actor = actor or engine.actor
    record = WorkflowRecord(
        workflow_exec_id=wx, workflow_name=src.workflow_name, version=version,
        state=W.RUNNING, workflow_request_id=request_id, input=payload, source=src.source,
        created_epoch=now, created_day=day_of(now), updated_epoch=now,
        check_epoch=engine.starting.next_check(now, now, defn),
        # Generation 1 with its phase one not yet done: the redrive's follow-ups (and
        # the reconciler's finish_start) create what runs; roots_ready: no start repair.
        redrive_count=1, roots_ready=now, forked_from=source, priority=src.priority,
        attributes=src.attributes,
        history=(Change(W.REQUESTED.value, now, actor), Change(W.RUNNING.value, now, actor)))
    if code:  # its code replays the source's ctx.uuid4/random/now (engine/fork_code.py)
        record = replace(record, **fork_code.seeded(src))
    record = engine.hooks.shape(Feature.begin, record)
    ask = admission(engine, record, defn, None, {})
    if ask is not None and not ask.go:
        raise NotAllowedNow(f"{defn.max_running} run(s) of {src.workflow_name!r} are "
                            "running (max_running): fork when one has ended",
                            workflow_exec_id=source)
    if ask is not None:
        record = replace(record, **ask.changes)
    engine.store.cold.put_request(RequestRecord(
        request_id, src.workflow_name, now, version=version, input=payload, manual=True,
        source=src.source, workflow_exec_id=wx, traceparent=record.traceparent,
        expires_epoch=rules.expiry(now + rules.RETENTION_SLACK_SECONDS,
                                   engine.definitions.retention(defn))))
    # The reused attempts first: once the run's item exists, a reconcile visit may finish
    # the start (the redrive's phase one), and it must find them there, not run them.
    engine.threads.each(lambda name: _reuse(engine, record, defn, kept[name], now), list(kept))
    attrs = run_attributes.decode(src.attributes)
    if attrs:  # the source's, listed like a start's (engine/starting.py)
        engine.store.put_attributes(
            record, {k: run_attributes.value_text(v) for k, v in attrs.items()},
            rules.expiry(now + rules.ATTRIBUTE_SLACK_SECONDS, engine.definitions.retention(defn)))
    if not engine.store.create_workflow(record):
        if ask is not None:
            ask.lost(None)
        existing = engine.reads.workflow(wx)
        if existing.forked_from != source:
            raise InvalidInput(f"request id {request_id!r} already started run {wx}, "
                               f"not a fork of {source}", field="request_id")
        # A replay: finish what the first call left, as its reconcile visit would (its
        # phase one, or the launch of what it made ready).
        reconcile(engine, wx)
        return wx
    if ask is not None:
        ask.landed(record)
    engine.feature(Redrive).followups(engine.reads.workflow(wx), defn)
    return wx


def _reuse(engine: Engine, wf: WorkflowRecord, defn: WorkflowDefinition,
           src: ActivityRecord, now: float) -> None:
    """The kept activity's first attempt, created COMPLETED with the source's output."""
    name = src.activity_name
    record = ActivityRecord(
        workflow_exec_id=wf.workflow_exec_id,
        activity_exec_id=activity_exec_id(wf.workflow_exec_id, name, 1),
        activity_name=name, workflow_name=wf.workflow_name, attempt=1, state=A.COMPLETED,
        workflow_version=wf.version, created_epoch=now, updated_epoch=now,
        started_epoch=now, ended_epoch=now, output=src.output, redrive_count=0,
        traceparent=wf.traceparent,
        history=(Change(A.COMPLETED.value, now, REUSED + src.activity_exec_id),))
    if src.step is not None:  # a code run's step (engine/fork_code.py)
        record = record.with_changes(**fork_code.reused_fields(src, now))
    # attribute_not_exists: a replayed fork finds it there and writes nothing.
    engine.store.create_activity(record)

