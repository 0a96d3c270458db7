"""The full logic: start, transition with follow-ups, cancel. Sweep/reconcile live in
:mod:`whimbrel.engine.sweep`.

Every state change is one conditional write through the store. Follow-up work is
idempotent and re-derivable from the tables, so a crash between any two writes is
repaired by a replay (stream redelivery) or by the reconciler (docs/architecture.md).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from pynamodb.expressions.update import Action

from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import (
    ActivityNotFound,
    DefinitionNotFound,
    IllegalTransition,
    InvalidInput,
    StateConflict,
    WorkflowNotFound,
)
from whimbrel.contract.ids import (
    activity_exec_id,
    new_request_id,
    parse_activity_exec_id,
    shard_of,
    unit_random,
    workflow_exec_id_for,
)
from whimbrel.contract.limits import MAX_INPUT_BYTES, MAX_OUTPUT_BYTES
from whimbrel.contract.payloads import clip_error, encode_payload
from whimbrel.contract.states import (
    ACTIVITY_PENDING,
    ACTIVITY_TRANSITIONS,
    ActivityState,
    Transition,
    WorkflowState,
    next_activity_state,
)
from whimbrel.engine.ports import Clock, Launcher, LaunchRequest
from whimbrel.engine.views import ActivityExec, WorkflowExec
from whimbrel.store import specs
from whimbrel.store.errors import ConditionFailed
from whimbrel.store.models import (
    ActivityExecModel,
    WorkflowExecModel,
    history_entry,
)
from whimbrel.store.store import END_NODE, Store

log = logging.getLogger("whimbrel.engine")

A = ActivityState
W = WorkflowState

#: First reconcile visit after a workflow starts; later visits back off (sweep.py).
RECONCILE_GRACE_SECONDS = 120.0


def day_of(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")


class Engine:
    """Whimbrel's full logic over one store. Thread-safe; share one per process."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock,
        launchers: Mapping[str, Launcher] | None = None,
        actor: str = "engine",
        reconcile_grace_seconds: float = RECONCILE_GRACE_SECONDS,
    ) -> None:
        self.store = store
        self.clock = clock
        self.launchers: dict[str, Launcher] = dict(launchers or {})
        self.actor = actor
        self.reconcile_grace_seconds = reconcile_grace_seconds
        self._definitions: dict[tuple[str, int], WorkflowDefinition] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="whimbrel-io")

    # -- definitions -----------------------------------------------------------------

    def register(self, definition: WorkflowDefinition) -> int:
        """Store ``definition`` as a new version (or return the version it equals)."""
        definition.validate()
        text = definition.to_json()
        while True:
            latest = self.store.latest_definition(definition.name)
            if latest is not None and latest.definition == text:
                return int(latest.version)
            version = int(latest.version) + 1 if latest is not None else 1
            if self.store.put_definition(definition.name, version, text, self.clock(),
                                         definition.description):
                with self._lock:
                    self._definitions[(definition.name, version)] = definition
                return version

    def definition(self, name: str, version: int | None = None) -> tuple[int, WorkflowDefinition]:
        """The definition ``name`` at ``version`` (latest when None).

        Raises:
            DefinitionNotFound: no such name or version.
        """
        if version is not None:
            with self._lock:
                cached = self._definitions.get((name, version))
            if cached is not None:
                return version, cached
            item = self.store.get_definition(name, version)
        else:
            item = self.store.latest_definition(name)
        if item is None:
            raise DefinitionNotFound(name, version)
        defn = WorkflowDefinition.from_json(item.definition)
        with self._lock:
            self._definitions[(name, int(item.version))] = defn
        return int(item.version), defn

    # -- start -----------------------------------------------------------------------

    def start(
        self,
        name: str,
        input: Any = None,
        *,
        version: int | None = None,
        request_id: str | None = None,
        source: str | None = None,
        write_request: bool = True,
    ) -> str:
        """Start (or resume starting) the execution for ``request_id``. Idempotent.

        Raises:
            DefinitionNotFound: unknown workflow name or version.
            InvalidInput: input too large or not JSON; request id used for another workflow.
        """
        payload = encode_payload(input, field="input", max_bytes=MAX_INPUT_BYTES)
        if not isinstance(name, str) or not name:
            raise InvalidInput("workflow_name must be a non-empty string", field="workflow_name")
        version, defn = self.definition(name, version)
        request_id = request_id or new_request_id()
        wx = workflow_exec_id_for(request_id)
        now = self.clock()
        if write_request:
            self.store.put_request(self.store.models.workflow_request(
                request_id, workflow_name=name, version=version, input=payload, manual=True,
                source=source, when_epoch=now, workflow_exec_id=wx))
        item = self.store.models.workflow_exec(
            wx,
            workflow_name=name,
            version=version,
            state=W.REQUESTED.value,
            workflow_request_id=request_id,
            input=payload,
            source=source,
            created_epoch=now,
            created_day=day_of(now),
            updated_epoch=now,
            check_shard=shard_of(wx, specs.RECONCILE_SHARDS),
            check_epoch=now + self.reconcile_grace_seconds,
            history=[history_entry(state=W.REQUESTED.value, at=now, by=self.actor)],
        )
        if not self.store.create_workflow(item):
            existing = self.store.get_workflow(wx)
            if existing is None:  # pragma: no cover - deleted between two calls
                raise WorkflowNotFound(wx)
            if existing.workflow_name != name:
                raise InvalidInput(
                    f"request id {request_id!r} already started workflow "
                    f"{existing.workflow_name!r}, not {name!r}",
                    field="workflow_request_id",
                )
            item = existing
        self.resume_start(item, defn)
        return wx

    def resume_start(self, wf: WorkflowExecModel, defn: WorkflowDefinition) -> None:
        """Create what a start needs (idempotently), move to RUNNING, launch the roots."""
        wx = wf.workflow_exec_id
        if wf.state == W.REQUESTED.value:
            self._materialize(wf, defn)
            try:
                self.store.move_workflow(wx, [W.REQUESTED.value], W.RUNNING.value, self.clock(),
                                         actor=self.actor)
            except ConditionFailed:
                pass  # another starter moved it, or it was cancelled meanwhile
            wf = self._workflow(wx)
        if wf.state == W.RUNNING.value:
            for root in defn.roots:
                self._ready_and_launch(wf, defn, root, 1)
        elif wf.state in (W.CANCEL_REQUESTED.value, W.FAILED_WAITING.value):
            self.settle(wx)

    def _materialize(self, wf: WorkflowExecModel, defn: WorkflowDefinition) -> None:
        wx = wf.workflow_exec_id
        now = self.clock()
        m = self.store.models.activity_exec

        def create(act_name: str) -> None:
            spec = defn.activity(act_name)
            self.store.create_activity(m(
                wx,
                activity_exec_id(wx, act_name, 1),
                activity_name=act_name,
                workflow_name=wf.workflow_name,
                attempt=1,
                state=A.REQUESTED.value,
                created_epoch=now,
                updated_epoch=now,
                heartbeat_timeout_seconds=spec.heartbeat_timeout_seconds,
                history=[history_entry(state=A.REQUESTED.value, at=now, by=self.actor)],
            ))

        jobs = [self._pool.submit(create, n) for n in defn.names]
        # Fan-in edges exist only for activities with two or more upstreams (and for the
        # workflow's end when it has two or more sinks); one-upstream hand-offs need none.
        for act in defn.activities:
            if len(act.depends_on) > 1:
                jobs.append(self._pool.submit(
                    self.store.put_dependencies, wx, act.name, act.depends_on))
        if len(defn.sinks) > 1:
            jobs.append(self._pool.submit(self.store.put_dependencies, wx, END_NODE, defn.sinks))
        for job in jobs:
            job.result()

    # -- transitions -------------------------------------------------------------------

    def transition(
        self,
        activity_exec_id_: str,
        transition: Transition,
        *,
        output: Any = None,
        error: Any = None,
        actor: str | None = None,
    ) -> ActivityExec:
        """Apply one contract move and its follow-ups.

        Raises:
            ActivityNotFound: no such activity execution.
            IllegalTransition: the contract never allows this move for this activity.
            StateConflict: the move was possible once, but another actor moved the
                activity on first.
            InvalidInput: output too large or not JSON.
        """
        transition = Transition(transition)
        item = self._activity(activity_exec_id_)
        current = ActivityState(item.state)
        try:
            new_state = next_activity_state(current, transition,
                                            activity_exec_id=activity_exec_id_)
        except IllegalTransition:
            if self._was_possible(item, transition):
                raise StateConflict(
                    expected=[s.value for (s, t) in ACTIVITY_TRANSITIONS if t is transition],
                    actual=current.value, activity_exec_id=activity_exec_id_,
                    transition=transition.value) from None
            raise
        _, defn = self.definition(item.workflow_name, self._workflow_version(item))
        while True:
            actions = self._actions_for(item, defn, new_state, output=output, error=error)
            try:
                moved = self.store.move_activity(activity_exec_id_, current.value,
                                                  new_state.value, self.clock(),
                                                  actor=actor or self.actor, extra=actions)
                break
            except ConditionFailed:
                actual = self.store.get_activity(activity_exec_id_)
                # Someone moved the activity between our read and our write. If the
                # contract still allows this verb from where it is now, apply it from
                # there: a worker reporting COMPLETED while a cancel turned RUNNING
                # into CANCELLED_RUNNING must end it CANCELLED, not lose the report
                # and leave the workflow waiting forever (test_complete_and_cancel_at_once).
                # Each retry follows a state change, and the contract has no cycles.
                retry_to = None
                if actual is not None and actual.state != current.value:
                    retry_to = ACTIVITY_TRANSITIONS.get((ActivityState(actual.state),
                                                         transition))
                if actual is None or retry_to is None:
                    raise StateConflict(expected=current.value,
                                        actual=actual.state if actual else None,
                                        activity_exec_id=activity_exec_id_,
                                        transition=transition.value) from None
                item, current, new_state = actual, ActivityState(actual.state), retry_to
        self.after(moved)
        return ActivityExec.from_model(moved)

    @staticmethod
    def _was_possible(item: ActivityExecModel, transition: Transition) -> bool:
        seen = {h.state for h in (item.history or [])}
        return any(s.value in seen for (s, t) in ACTIVITY_TRANSITIONS if t is transition)

    def _workflow_version(self, item: ActivityExecModel) -> int:
        wf = self._workflow(item.workflow_exec_id)
        return int(wf.version)

    def _actions_for(self, item: ActivityExecModel, defn: WorkflowDefinition,
                     new_state: ActivityState, *, output: Any = None,
                     error: Any = None) -> list[Action]:
        m = self.store.models.activity_exec
        now = self.clock()
        out: list[Action] = []
        if new_state is A.RUNNING:
            out += [m.started_epoch.set(now), m.heartbeat_epoch.set(now),
                    m.claim_shard.remove(), m.claim_key.remove()]
            hb = item.heartbeat_timeout_seconds
            if hb:
                out += [m.timer_shard.set(shard_of(item.activity_exec_id, specs.TIMER_SHARDS)),
                        m.timer_epoch.set(now + float(hb))]
        elif new_state is A.READY:
            out += [m.timer_shard.remove(), m.timer_epoch.remove()]
            spec = defn.activity(item.activity_name)
            if not spec.launcher.is_push:
                out += [m.claim_shard.set(shard_of(item.activity_exec_id, specs.CLAIM_SHARDS)),
                        m.claim_key.set(f"{item.workflow_name}/{item.activity_name}/"
                                        f"{item.activity_exec_id}")]
        elif new_state in (A.QUEUED, A.PREPARING):
            out += [m.claim_shard.remove(), m.claim_key.remove(),
                    m.timer_shard.remove(), m.timer_epoch.remove()]
        elif new_state.is_terminal:
            out += [m.ended_epoch.set(now), m.timer_shard.remove(), m.timer_epoch.remove(),
                    m.claim_shard.remove(), m.claim_key.remove()]
            if new_state is A.COMPLETED or output is not None:
                text = encode_payload(output, field="output", max_bytes=MAX_OUTPUT_BYTES)
                if text is not None:
                    out.append(m.output.set(text))
            clipped = clip_error(error)
            if clipped is not None:
                out.append(m.error.set(clipped))
        return out

    def ensure_followups(self, activity_exec_id_: str) -> None:
        """Re-run the follow-ups of the activity's current state (redelivery, repair)."""
        self.after(self._activity(activity_exec_id_))

    def after(self, item: ActivityExecModel) -> None:
        """Follow-ups of the state ``item`` is now in. Idempotent."""
        state = ActivityState(item.state)
        if state not in (A.COMPLETED, A.FAILED, A.TIMED_OUT, A.CANCELLED):
            return
        wf = self._workflow(item.workflow_exec_id)
        _, defn = self.definition(wf.workflow_name, int(wf.version))
        if wf.state in (W.FAILED_WAITING.value, W.CANCEL_REQUESTED.value):
            self.settle(wf.workflow_exec_id)
            return
        if wf.state != W.RUNNING.value:
            return
        if state is A.COMPLETED:
            self._release_dependents(wf, defn, item.activity_name)
            self._maybe_complete(wf, defn, item.activity_name)
        elif state in (A.FAILED, A.TIMED_OUT):
            self._on_failure(wf, defn, item)
        else:  # CANCELLED while the workflow runs: nothing downstream can ever run
            self.fail_workflow(wf.workflow_exec_id,
                               f"activity {item.activity_name} was cancelled")

    def _release_dependents(self, wf: WorkflowExecModel, defn: WorkflowDefinition,
                            name: str) -> None:
        wx = wf.workflow_exec_id
        for dep in defn.dependents(name):
            if len(defn.activity(dep).depends_on) > 1:
                # Delete our edge, then look for any edge left. Of two upstreams that
                # finish together at least one sees none left (each deletes before it
                # reads); both may, and then the READY write picks one winner.
                self.store.delete_dependency(wx, dep, name)
                if self.store.pending_dependencies(wx, dep):
                    continue
            self._ready_and_launch(wf, defn, dep, 1)

    def _maybe_complete(self, wf: WorkflowExecModel, defn: WorkflowDefinition,
                        name: str) -> None:
        sinks = defn.sinks
        if name not in sinks:
            return
        if len(sinks) > 1:
            self.store.delete_dependency(wf.workflow_exec_id, END_NODE, name)
            if self.store.pending_dependencies(wf.workflow_exec_id, END_NODE):
                return
        self._finish_workflow(wf.workflow_exec_id, [W.RUNNING.value], W.COMPLETED)

    def _finish_workflow(self, wx: str, expected: list[str], state: WorkflowState,
                         error: str | None = None) -> bool:
        m = self.store.models.workflow_exec
        now = self.clock()
        extra: list[Action] = [m.ended_epoch.set(now), m.check_shard.remove(),
                               m.check_epoch.remove()]
        if error:
            extra.append(m.error.set(error))
        try:
            self.store.move_workflow(wx, expected, state.value, now, actor=self.actor,
                                     extra=extra)
        except ConditionFailed:
            return False
        log.info("workflow %s %s", wx, state.value)
        return True

    def _ready_and_launch(self, wf: WorkflowExecModel, defn: WorkflowDefinition, name: str,
                          attempt: int) -> None:
        """Move a REQUESTED attempt on: QUEUED and launched (push launcher, no upstream),
        or READY (and then QUEUED and launched for push launchers)."""
        spec = defn.activity(name)
        aeid = activity_exec_id(wf.workflow_exec_id, name, attempt)
        item = self.store.models.activity_exec(wf.workflow_exec_id, aeid,
                                               activity_name=name,
                                               workflow_name=wf.workflow_name, attempt=attempt,
                                               heartbeat_timeout_seconds=spec.heartbeat_timeout_seconds)
        if spec.launcher.is_push and not spec.depends_on:
            self._queue_and_launch(wf, defn, item, A.REQUESTED)
            return
        try:
            self.store.move_activity(aeid, A.REQUESTED.value, A.READY.value, self.clock(),
                                     actor=self.actor,
                                     extra=self._actions_for(item, defn, A.READY))
        except ConditionFailed:
            pass  # already READY (or further): whoever won may have died before QUEUED
        if spec.launcher.is_push:
            self._queue_and_launch(wf, defn, item, A.READY)

    def _queue_and_launch(self, wf: WorkflowExecModel, defn: WorkflowDefinition,
                          item: ActivityExecModel, from_state: ActivityState) -> None:
        spec = defn.activity(item.activity_name)
        try:
            self.store.move_activity(item.activity_exec_id, from_state.value, A.QUEUED.value,
                                     self.clock(), actor=self.actor,
                                     extra=self._actions_for(item, defn, A.QUEUED))
        except ConditionFailed:
            return  # someone else queued it: only the winner launches
        launcher = self.launchers.get(spec.launcher.kind)
        request = LaunchRequest(
            activity_exec_id=item.activity_exec_id,
            activity_name=item.activity_name,
            workflow_exec_id=wf.workflow_exec_id,
            workflow_name=wf.workflow_name,
            attempt=int(item.attempt),
            config=dict(spec.launcher.config),
            endpoint_url=self.store.endpoint_url,
            table_prefix=self.store.table_prefix,
        )
        try:
            if launcher is None:
                raise RuntimeError(
                    f"no {spec.launcher.kind!r} launcher is configured in this process")
            launcher.launch(request)
        except Exception as exc:  # any launch failure fails this attempt, recorded
            log.warning("launch of %s failed: %s", item.activity_exec_id, exc)
            try:
                self.transition(item.activity_exec_id, Transition.FAILED,
                                error=f"launch failed: {type(exc).__name__}: {exc}")
            except StateConflict:
                pass  # the activity moved on by itself (it did start after all)

    def _on_failure(self, wf: WorkflowExecModel, defn: WorkflowDefinition,
                    item: ActivityExecModel) -> None:
        spec = defn.activity(item.activity_name)
        attempt = int(item.attempt)
        if attempt < spec.retry.max_attempts:
            # The failure time is on the item, so every replay computes the same retry.
            failed_at = float(item.ended_epoch or item.updated_epoch)
            delay = spec.retry.delay_after(attempt, unit_random(item.activity_exec_id))
            not_before = failed_at + delay
            nxt = activity_exec_id(wf.workflow_exec_id, item.activity_name, attempt + 1)
            m = self.store.models.activity_exec
            now = self.clock()
            self.store.create_activity(m(
                wf.workflow_exec_id, nxt,
                activity_name=item.activity_name,
                workflow_name=wf.workflow_name,
                attempt=attempt + 1,
                state=A.REQUESTED.value,
                created_epoch=now,
                updated_epoch=now,
                heartbeat_timeout_seconds=spec.heartbeat_timeout_seconds,
                not_before_epoch=not_before,
                # Armed so the sweep launches it when due (and finds it if we die now).
                timer_shard=shard_of(nxt, specs.TIMER_SHARDS),
                timer_epoch=not_before,
                history=[history_entry(state=A.REQUESTED.value, at=now, by=self.actor)],
            ))
            if not_before <= now:
                self._ready_and_launch(wf, defn, item.activity_name, attempt + 1)
            return
        why = f"activity {item.activity_name} {item.state} after {attempt} attempt(s)"
        if item.error:
            why += f": {item.error}"
        self.fail_workflow(wf.workflow_exec_id, why)

    # -- workflow-level moves ------------------------------------------------------------

    def fail_workflow(self, wx: str, error: str) -> None:
        m = self.store.models.workflow_exec
        try:
            self.store.move_workflow(wx, [W.RUNNING.value, W.REQUESTED.value],
                                     W.FAILED_WAITING.value, self.clock(), actor=self.actor,
                                     extra=[m.error.set(clip_error(error) or "")])
        except ConditionFailed:
            pass  # already failing, cancelling or finished
        self.settle(wx)

    def cancel(self, wx: str) -> None:
        """Request cancellation and stop what can be stopped. Idempotent.

        Raises:
            WorkflowNotFound: no such execution.
        """
        wf = self._workflow(wx)
        if wf.state not in (W.CANCEL_REQUESTED.value,) and not W(wf.state).is_terminal:
            try:
                self.store.move_workflow(
                    wx, [W.REQUESTED.value, W.RUNNING.value, W.FAILED_WAITING.value],
                    W.CANCEL_REQUESTED.value, self.clock(), actor=self.actor)
            except ConditionFailed:
                pass  # finished or cancelled meanwhile; settle sorts it out
        self.settle(wx)

    def settle(self, wx: str) -> None:
        """For a failing or cancelled workflow: cancel what has not started, ask running
        activities to stop (cancel only), and end the workflow once nothing runs."""
        wf = self._workflow(wx)
        state = W(wf.state)
        cancelling = state is W.CANCEL_REQUESTED
        if state not in (W.FAILED_WAITING, W.CANCEL_REQUESTED) and not state.is_terminal:
            return
        active = False
        for act in self.store.list_activities(wx):
            if self._stop_activity(act, ask_running=cancelling and not state.is_terminal):
                active = True
        if state.is_terminal:
            self.store.clear_workflow_check(wx)
            return
        if not active:
            final = W.CANCELLED if cancelling else W.FAILED
            self._finish_workflow(wx, [state.value], final)

    def _stop_activity(self, act: ActivityExecModel, *, ask_running: bool) -> bool:
        """Cancel a not-started attempt; returns True while the attempt may still run."""
        for _ in range(8):  # each lost race means the activity moved on; re-read and retry
            st = ActivityState(act.state)
            if st.is_terminal:
                return False
            if st is A.CANCELLED_RUNNING:
                return True
            if st is A.RUNNING and not ask_running:
                return True
            target = A.CANCELLED_RUNNING if st is A.RUNNING else A.CANCELLED
            m = self.store.models.activity_exec
            extra: list[Action] = []
            if target is A.CANCELLED:
                extra = [m.ended_epoch.set(self.clock()), m.timer_shard.remove(),
                         m.timer_epoch.remove(), m.claim_shard.remove(), m.claim_key.remove()]
            try:
                self.store.move_activity(act.activity_exec_id, st.value, target.value,
                                         self.clock(), actor=self.actor, extra=extra)
                return target is A.CANCELLED_RUNNING
            except ConditionFailed:
                fresh = self.store.get_activity(act.activity_exec_id)
                if fresh is None:
                    return False
                act = fresh
        return True

    # -- reads ---------------------------------------------------------------------------

    def _workflow(self, wx: str) -> WorkflowExecModel:
        wf = self.store.get_workflow(wx)
        if wf is None:
            raise WorkflowNotFound(wx)
        return wf

    def _activity(self, aeid: str) -> ActivityExecModel:
        parse_activity_exec_id(aeid)
        item = self.store.get_activity(aeid)
        if item is None:
            raise ActivityNotFound(aeid)
        return item

    def get_workflow(self, wx: str, *, with_activities: bool = True) -> WorkflowExec:
        wf = self._workflow(wx)
        acts: tuple[ActivityExec, ...] = ()
        if with_activities:
            acts = tuple(ActivityExec.from_model(a) for a in self.store.list_activities(wx))
        return WorkflowExec.from_model(wf, acts)

    def get_activity(self, aeid: str) -> ActivityExec:
        return ActivityExec.from_model(self._activity(aeid))

    def latest_attempts(self, wx: str) -> dict[str, ActivityExecModel]:
        latest: dict[str, ActivityExecModel] = {}
        for act in self.store.list_activities(wx):
            cur = latest.get(act.activity_name)
            if cur is None or int(act.attempt) > int(cur.attempt):
                latest[act.activity_name] = act
        return latest

    def close(self) -> None:
        self._pool.shutdown(wait=False)


def pending_states() -> Iterable[str]:
    return (s.value for s in ACTIVITY_PENDING)
