"""Kinds as objects (contract/kinds.py, contract/waits.py): one table of launcher kinds
from which definitions, the engine's waits and the console derive, and no kind that
falls through to another's behaviour."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from whimbrel import ActivityDefinition as Act
from whimbrel import ActivityExec, ActivityState, LauncherSpec, WorkflowExec, WorkflowState
from whimbrel.contract import kinds, waits
from whimbrel.contract.launching import LAUNCHER_KINDS, kind_of, register, worker_kinds
from whimbrel.engine import waits as engine_waits
from whimbrel.ui import actions


class Beacon(waits.WaitKind):
    """A trial kind a newcomer might add: ended by a signal, with its own settings and
    nothing said about decisions."""

    ends = waits.Ends.SIGNAL
    ends_by = "a beacon (a signal named by its 'beam')"

    def signal_name(self, spec: Act) -> str | None:
        return str(spec.launcher.config.get("beam"))


class Review(waits.WaitKind):
    """A trial kind that says a person's decision ends it."""

    ends = waits.Ends.DECISION
    ends_by = "a reviewer's decision"


@pytest.fixture
def trial_kinds() -> Iterator[None]:
    undo = [register(Beacon("beacon", ("beam",), settings=frozenset({"beam"}))),
            register(Review("review", settings=frozenset({"timeout_seconds"})))]
    yield
    for remove in undo:
        remove()


class Decides:
    """A facade with the console's decision and signal methods."""

    def approve(self, aeid: str, *, by: str, comment: str = "") -> None: ...

    def reject(self, aeid: str, *, by: str, comment: str = "") -> None: ...

    def cancel_workflow(self, wx: str) -> None: ...


def _ready(name: str, waiting_for: str | None) -> ActivityExec:
    return ActivityExec(
        activity_exec_id=f"wx:{name}:1", activity_name=name, workflow_exec_id="wx",
        workflow_name="w", state=ActivityState.READY, attempt=1, output=None, error=None,
        created_epoch=1.0, updated_epoch=1.0, started_epoch=None, ended_epoch=None,
        heartbeat_epoch=None, heartbeat_timeout_seconds=None, not_before_epoch=None, history=(),
        waiting_for=waiting_for)


def _offered(act: ActivityExec) -> list[str]:
    run = WorkflowExec(workflow_exec_id="wx", workflow_name="w", version=1,
                       state=WorkflowState.RUNNING, workflow_request_id="r", input=None,
                       error=None, created_epoch=1.0, updated_epoch=1.0, ended_epoch=None,
                       history=(), activities=(act,))
    return [a.name for a in actions.available(Decides(), run, act, "activity")]


def test_one_table_of_kinds() -> None:
    assert set(LAUNCHER_KINDS) == {k.name for k in kinds.RUN_KINDS} | set(waits.WAIT_KINDS)
    assert worker_kinds() == {"python"}
    assert [n for n, k in LAUNCHER_KINDS.items() if k.how is kinds.How.PULL] == ["external"]
    assert {n for n, k in LAUNCHER_KINDS.items() if k.how is kinds.How.WAIT} \
        == set(waits.WAIT_KINDS) >= {"timer", "signal", "approval"}
    # Every way a wait ends has the engine's part: none borrows another's.
    assert set(engine_waits.ENDINGS) == set(waits.Ends)


def test_an_unknown_kind_is_a_clear_error_never_a_guess() -> None:
    spec = LauncherSpec("carrier_pigeon")
    assert spec.problems("activity 'a'") == [
        "activity 'a': unknown launcher type 'carrier_pigeon' (known: "
        f"{', '.join(sorted(LAUNCHER_KINDS))})"]
    assert "approval, command, ecs, external, lambda" in spec.problems("a")[0]
    for ask in (lambda: spec.is_push, lambda: spec.is_pull, lambda: spec.is_wait,
                lambda: spec.needs_worker, lambda: kind_of("carrier_pigeon")):
        with pytest.raises(kinds.UnknownKind, match="unknown launcher type 'carrier_pigeon'"):
            ask()
    act = Act("a", launcher=LauncherSpec("external"))
    with pytest.raises(waits.InvalidInput, match="'a' is not a wait"):
        waits.waiting_for(act, None)
    with pytest.raises(waits.InvalidInput, match="is not a wait"):
        waits.timeout_reason(act)
    # A kind the table does not know, as a stored row could say: no buttons.
    assert _offered(_ready("a", "carrier_pigeon")) == []


@pytest.mark.usefixtures("trial_kinds")
def test_a_trial_wait_kind_gets_its_own_behaviour_and_no_approve_button() -> None:
    beacon = Act("b", launcher=LauncherSpec("beacon", {"beam": "lighthouse"}))
    assert beacon.launcher.is_wait and not beacon.launcher.is_push
    assert beacon.problems({"b"}) == []
    assert LauncherSpec("beacon", {"approvers": ["x"]}).problems("b") == [
        "b: launcher 'beacon' needs 'beam'",
        "b: beacon launcher has no setting 'approvers' (it takes beam)"]
    # Its own words, not an approval's.
    assert waits.waiting_for(beacon, None) == "beacon:lighthouse"
    assert waits.signal_waited("beacon:lighthouse") == "lighthouse"
    assert waits.deadline(beacon, 10.0, None) is None
    assert waits.timeout_reason(beacon) == "no beacon event within its timeout_seconds " \
        "(None s)"
    assert waits.signal_name(beacon) == "lighthouse" and not waits.decided(beacon)
    assert "ends only by a beacon" in str(waits.WaitsForEvent(
        activity_exec_id="wx:b:1", kind="beacon", transition="COMPLETED"))
    assert engine_waits.ending(beacon) is engine_waits.ENDINGS[waits.Ends.SIGNAL]
    # The console: no Approve or Reject for a kind that does not say a decision ends it.
    assert _offered(_ready("b", waits.waiting_for(beacon, None))) == []
    assert not waits.offers_decision("beacon:lighthouse")
    # ...and it prefills the console's signal form, as a signal wait does.
    ready = _ready("b", "beacon:lighthouse")
    assert actions.signal_hint(WorkflowExec(
        workflow_exec_id="wx", workflow_name="w", version=1, state=WorkflowState.RUNNING,
        workflow_request_id="r", input=None, error=None, created_epoch=1.0,
        updated_epoch=1.0, ended_epoch=None, history=(), activities=(ready,))) == "lighthouse"


@pytest.mark.usefixtures("trial_kinds")
def test_a_trial_kind_a_decision_ends_is_offered_the_decision() -> None:
    review = Act("r", launcher=LauncherSpec("review", {"timeout_seconds": 60}))
    assert review.problems({"r"}) == []
    assert waits.decided(review) and waits.signal_name(review) is None
    assert waits.deadline(review, 10.0, None) == 70.0
    assert _offered(_ready("r", waits.waiting_for(review, None))) == ["approve", "reject"]
    assert _offered(_ready("r", "approval")) == ["approve", "reject"]
    assert _offered(_ready("s", "signal:payment")) == []
    assert waits.signal_waited("review") is None and waits.signal_waited("pigeon:x") is None
    assert waits.signal_waited("signal:payment") == "payment"


def test_register_refuses_a_name_taken_and_undoes_cleanly() -> None:
    with pytest.raises(ValueError, match="'timer' is already registered"):
        register(kinds.LauncherKind("timer"))
    before: dict[str, Any] = dict(LAUNCHER_KINDS)
    remove = register(kinds.LauncherKind("pigeon_post", ("loft",)))
    assert LauncherSpec("pigeon_post", {"loft": "x"}).is_push
    remove()
    assert dict(LAUNCHER_KINDS) == before and "pigeon_post" not in waits.WAIT_KINDS
