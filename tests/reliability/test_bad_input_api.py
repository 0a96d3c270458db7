"""Bad input corpus (issue 5, part 5), continued for the public Python API: the methods
and argument kinds ``test_bad_input.py`` leaves out (the Simple API writers
``request_workflow`` and ``send_activity_event``, ``claim``, ``run_activity``,
``get_definition``; ids and verbs of the wrong type; lone surrogates; ids DynamoDB
refuses). ``test_bad_input.py`` has 26 API cases; this file adds the rest.

Each call must raise a ``WhimbrelError`` of the expected class whose message names the
problem (never a bare KeyError/TypeError/botocore error), and leave every stored item as
it was. ``test_boundary_checks`` covers the arguments the corpus first found escaping the
error tree (now checked by ``whimbrel.contract.checks``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from stream_records import corpus_findings, snapshot, waiting_runs

from whimbrel import (
    ActivityDefinition,
    LauncherSpec,
    NotAllowedNow,
    NotAnApprover,
    PoolNotFound,
    Whimbrel,
    WorkflowDefinition,
)
from whimbrel.contract.errors import (
    ActivityNotFound,
    DefinitionNotFound,
    InvalidDefinition,
    InvalidInput,
    StoreError,
    WhimbrelError,
    WorkflowNotFound,
)
from whimbrel.contract.ids import activity_exec_id
from whimbrel.testing import StepClock, fresh_table_prefix

EXT = LauncherSpec.external()

#: (label, call(wb, ctx), expected error class, words the message must contain)
Case = tuple[str, Callable[[Whimbrel, dict[str, str]], Any], type[WhimbrelError], str]

CORPUS: list[Case] = [
    # -- request_workflow (Simple API writer) ----------------------------------------------
    ("request: empty name", lambda wb, c: wb.request_workflow(""), InvalidInput,
     "workflow_name"),
    ("request: name not a string", lambda wb, c: wb.request_workflow(5),  # type: ignore[arg-type]
     InvalidInput, "workflow_name"),
    ("request: version 0", lambda wb, c: wb.request_workflow("ok", version=0), InvalidInput,
     "version must be an integer from 1"),
    ("request: version as text", lambda wb, c: wb.request_workflow(
        "ok", version="2"), InvalidInput, "version"),  # type: ignore[arg-type]
    ("request: oversized input", lambda wb, c: wb.request_workflow("ok", "x" * 200_000),
     InvalidInput, "more than the limit of 128000"),
    ("request: input a set", lambda wb, c: wb.request_workflow("ok", {1, 2}), InvalidInput,
     "input is not JSON-serialisable"),
    ("request: lone surrogate in input", lambda wb, c: wb.request_workflow(
        "ok", {"k": "\ud800"}), InvalidInput, "input is not valid Unicode text"),
    # -- send_activity_event (Simple API writer) --------------------------------------------
    ("event: malformed id", lambda wb, c: wb.send_activity_event("nope", "RUNNING"),
     InvalidInput, "activity_exec_id 'nope' is not of the form"),
    ("event: id None", lambda wb, c: wb.send_activity_event(None, "RUNNING"),  # type: ignore[arg-type]
     InvalidInput, "activity_exec_id None"),
    ("event: lone surrogate in id", lambda wb, c: wb.send_activity_event(
        f"{c['wx']}:B\udfff:1", "RUNNING"), InvalidInput, "is not of the form"),
    ("event: unknown verb", lambda wb, c: wb.send_activity_event(c["ready"], "EXPLODE"),
     InvalidInput, "unknown transition 'EXPLODE'"),
    ("event: lowercase verb", lambda wb, c: wb.send_activity_event(c["ready"], "running"),
     InvalidInput, "unknown transition 'running'"),
    ("event: oversized output", lambda wb, c: wb.send_activity_event(
        c["ready"], "COMPLETED", output="y" * 70_000), InvalidInput,
     "more than the limit of 64000"),
    # -- start_workflow ---------------------------------------------------------------------
    ("start: request id not a string", lambda wb, c: wb.start_workflow(
        "ok", request_id=123), InvalidInput, "workflow_request_id"),  # type: ignore[arg-type]
    ("start: lone surrogate in request id", lambda wb, c: wb.start_workflow(
        "ok", request_id="r-\udc80"), InvalidInput, "valid Unicode"),
    ("start: lone surrogate in input", lambda wb, c: wb.start_workflow(
        "ok", ["\udc80"]), InvalidInput, "input is not valid Unicode text"),
    ("start: input bytes", lambda wb, c: wb.start_workflow("ok", b"\x00"), InvalidInput,
     "input is not JSON-serialisable"),
    ("start: version beyond DynamoDB's digits", lambda wb, c: wb.start_workflow(
        "ok", version=10**40), InvalidInput, "version must be an integer from 1"),
    ("start: negative version", lambda wb, c: wb.start_workflow("ok", version=-1),
     InvalidInput, "not -1"),
    ("start: request id of 5,000 characters", lambda wb, c: wb.start_workflow(
        "ok", request_id="r" * 5000), StoreError, "2048 bytes"),
    # -- transitions, heartbeats, activity reads -----------------------------------------
    ("transition: verb None", lambda wb, c: wb.transition_activity(
        c["ready"], None), InvalidInput, "unknown transition None"),  # type: ignore[arg-type]
    ("transition: verb a number", lambda wb, c: wb.transition_activity(
        c["ready"], 3), InvalidInput, "unknown transition 3"),  # type: ignore[arg-type]
    ("transition: id None", lambda wb, c: wb.transition_activity(
        None, "RUNNING"), InvalidInput, "activity_exec_id None"),  # type: ignore[arg-type]
    ("transition: attempt in Arabic-Indic digits", lambda wb, c: wb.transition_activity(
        f"{c['wx']}:B:\u0661", "RUNNING"), InvalidInput, "is not of the form"),
    ("transition: lone surrogate in output", lambda wb, c: wb.transition_activity(
        c["running"], "COMPLETED", output="\udc80"), InvalidInput,
     "output is not valid Unicode text"),
    ("heartbeat: malformed id", lambda wb, c: wb.heartbeat("nope"), InvalidInput,
     "activity_exec_id 'nope'"),
    ("heartbeat: id None", lambda wb, c: wb.heartbeat(None),  # type: ignore[arg-type]
     InvalidInput, "activity_exec_id None"),
    ("get_activity: lone surrogate in id", lambda wb, c: wb.get_activity(
        f"{c['wx']}:\ud800:1"), InvalidInput, "is not of the form"),
    ("run_activity: malformed id", lambda wb, c: wb.run_activity("x:y").__enter__(),
     InvalidInput, "activity_exec_id 'x:y'"),
    ("run_activity: unknown activity", lambda wb, c: wb.run_activity(
        f"{c['wx']}:Z:1").__enter__(), ActivityNotFound, ":Z:1"),
    # -- workflows and definitions -------------------------------------------------------
    ("get_definition: unknown name", lambda wb, c: wb.get_definition("nope"),
     DefinitionNotFound, "'nope'"),
    ("cancel: id a number", lambda wb, c: wb.cancel_workflow(42),  # type: ignore[arg-type]
     InvalidInput, "workflow_exec_id must be a non-empty string"),
    ("get_workflow: id of 5,000 characters", lambda wb, c: wb.get_workflow("w" * 5000),
     InvalidInput, "at most 1024 characters"),
    ("register: definition that depends on an unknown activity",
     lambda wb, c: wb.register_workflow(WorkflowDefinition("ok", (
         ActivityDefinition("A", ("ghost",), launcher=EXT),))), WhimbrelError,
     "unknown activity 'ghost'"),
    ("register: a timer of -5 seconds", lambda wb, c: wb.register_workflow(
        WorkflowDefinition("ok", (ActivityDefinition("T", launcher={
            "type": "timer", "seconds": -5}),))), InvalidDefinition,
     "timer launcher seconds must be a number > 0"),
    # -- issue 20: cycles through child workflows, forged cursors ----------------------------
    ("register: a workflow whose child is itself", lambda wb, c: wb.register_workflow(
        WorkflowDefinition("self_child", (ActivityDefinition(
            "sub", launcher=LauncherSpec.workflow("self_child")),))), InvalidDefinition,
     "self_child → self_child"),
    ("register: a child that closes a cycle", lambda wb, c: wb.register_workflow(
        WorkflowDefinition("cyc_b", (ActivityDefinition(
            "sub", launcher=LauncherSpec.workflow("cyc_a")),))), InvalidDefinition,
     "cyc_a → cyc_b → cyc_a"),
    ("list_workflows: a forged cursor with an epoch of 1e300", lambda wb, c: wb.list_workflows(
        limit=1, cursor=_forged_cursor(wb, e=1e300)), InvalidInput, "cursor"),
    ("list_workflows: a forged cursor with an epoch of -1e300", lambda wb, c: wb.list_workflows(
        limit=1, cursor=_forged_cursor(wb, e=-1e300)), InvalidInput, "cursor"),
    # -- waits (issue 13) ----------------------------------------------------------------
    ("signal: run id None", lambda wb, c: wb.signal(None, "go"),  # type: ignore[arg-type]
     InvalidInput, "workflow_exec_id must be a non-empty string"),
    ("signal: unknown run", lambda wb, c: wb.signal("nope", "go"), WorkflowNotFound, "'nope'"),
    ("signal: name None", lambda wb, c: wb.signal(c["waits"], None),  # type: ignore[arg-type]
     InvalidInput, "signal name must match"),
    ("signal: name with a lone surrogate", lambda wb, c: wb.signal(c["waits"], "g\udc80"),
     InvalidInput, "signal name must match"),
    ("signal: a name nothing waits for", lambda wb, c: wb.signal(c["waits"], "stop"),
     InvalidInput, "waits for signal 'stop' (it waits for: go)"),
    ("signal: payload a set", lambda wb, c: wb.signal(c["waits"], "go", {1}), InvalidInput,
     "payload is not JSON-serialisable"),
    ("signal: oversized payload", lambda wb, c: wb.signal(c["waits"], "go", "z" * 70_000),
     InvalidInput, "more than the limit of 64000"),
    ("signal: lone surrogate in payload", lambda wb, c: wb.signal(c["waits"], "go", "\ud800"),
     InvalidInput, "payload is not valid Unicode text"),
    ("signal: empty signal_id", lambda wb, c: wb.signal(c["waits"], "go", signal_id=""),
     InvalidInput, "signal_id must be a non-empty string"),
    ("signal: signal_id a number", lambda wb, c: wb.signal(
        c["waits"], "go", signal_id=7), InvalidInput, "signal_id"),  # type: ignore[arg-type]
    ("approve: by None", lambda wb, c: wb.approve(c["gate"], by=None),  # type: ignore[arg-type]
     InvalidInput, "by must name who decides"),
    ("approve: by blank", lambda wb, c: wb.approve(c["gate"], by="   "), InvalidInput,
     "by must name who decides"),
    ("approve: comment a number", lambda wb, c: wb.approve(
        c["gate"], by="alice", comment=5), InvalidInput, "comment must be text"),  # type: ignore[arg-type]
    ("approve: comment of 10,000 characters", lambda wb, c: wb.approve(
        c["gate"], by="alice", comment="c" * 10_000), InvalidInput, "at most 4000"),
    ("approve: by a stranger", lambda wb, c: wb.approve(c["gate"], by="mallory"),
     NotAnApprover, "'mallory' may not decide"),
    ("reject: by a stranger", lambda wb, c: wb.reject(c["gate"], by="mallory"),
     NotAnApprover, "only alice may"),
    ("approve: id None", lambda wb, c: wb.approve(None, by="alice"),  # type: ignore[arg-type]
     InvalidInput, "activity_exec_id None"),
    ("approve: an activity that is no approval", lambda wb, c: wb.approve(
        c["ready"], by="alice"), InvalidInput, "is not an approval"),
    ("approve: unknown attempt", lambda wb, c: wb.approve(f"{c['wx']}:Z:1", by="alice"),
     ActivityNotFound, ":Z:1"),
    ("suspend: id a number", lambda wb, c: wb.suspend_workflow(42),  # type: ignore[arg-type]
     InvalidInput, "workflow_exec_id must be a non-empty string"),
    ("resume: id ''", lambda wb, c: wb.resume_workflow(""), InvalidInput, "workflow_exec_id"),
    ("resume: a run that is not suspended but ended", lambda wb, c: wb.resume_workflow(
        c["ended"]), NotAllowedNow, "only a SUSPENDED workflow can be resumed"),
    # -- schedules (issue 22) -------------------------------------------------------------
    ("schedule: a cron that never fires", lambda wb, c: wb.create_schedule(
        "s", "ok", cron="0 0 30 2 *"), InvalidInput, "never fires"),
    ("schedule: an unknown zone", lambda wb, c: wb.create_schedule(
        "s", "ok", cron="0 2 * * *", timezone="Mars/Olympus"), InvalidInput,
     "not a known IANA time zone"),
    ("schedule: an unknown workflow", lambda wb, c: wb.create_schedule(
        "s", "nope", every_seconds=60), DefinitionNotFound, "nope"),
    ("schedule: cron and rate", lambda wb, c: wb.create_schedule(
        "s", "ok", cron="@daily", every_seconds=60), InvalidInput, "exactly one of"),
    ("schedule: overlap 'sometimes'", lambda wb, c: wb.create_schedule(
        "s", "ok", every_seconds=60, overlap="sometimes"), InvalidInput, "overlap must be"),
    ("schedule: catch-up of 5 s", lambda wb, c: wb.create_schedule(
        "s", "ok", every_seconds=60, catchup_seconds=5), InvalidInput, "catchup_seconds"),
    ("schedule: id with @", lambda wb, c: wb.create_schedule(
        "a@b", "ok", every_seconds=60), InvalidInput, "schedule_id must match"),
    ("schedule: pause id None", lambda wb, c: wb.pause_schedule(None),  # type: ignore[arg-type]
     InvalidInput, "schedule_id must match"),
    ("schedule: backfill from 'a'", lambda wb, c: wb.backfill_schedule(
        "s", "a", "b"), InvalidInput, "start must be epoch seconds"),  # type: ignore[arg-type]
    # -- pools, max_running and priority (issue 22) -------------------------------------------
    ("set_pool: negative slots", lambda wb, c: wb.set_pool("p", slots=-1, per_second=None),
     InvalidInput, "slots must be a whole number from 0"),
    ("set_pool: fractional slots", lambda wb, c: wb.set_pool(
        "p", slots=1.5, per_second=None), InvalidInput, "not 1.5"),  # type: ignore[arg-type]
    ("set_pool: slots True", lambda wb, c: wb.set_pool(
        "p", slots=True, per_second=None), InvalidInput, "not True"),
    ("set_pool: slots beyond 100,000", lambda wb, c: wb.set_pool(
        "p", slots=100_001, per_second=None), InvalidInput, "from 0 (closed) to 100000"),
    ("set_pool: a rate of 0", lambda wb, c: wb.set_pool("p", slots=None, per_second=0),
     InvalidInput, "per_second must be a number above 0"),
    ("set_pool: a negative rate", lambda wb, c: wb.set_pool("p", slots=1, per_second=-2.0),
     InvalidInput, "not -2.0"),
    ("set_pool: an infinite rate", lambda wb, c: wb.set_pool(
        "p", slots=None, per_second=float("inf")), InvalidInput, "at most 100000"),
    ("set_pool: a NaN rate", lambda wb, c: wb.set_pool(
        "p", slots=None, per_second=float("nan")), InvalidInput, "per_second"),
    ("set_pool: a rate as text", lambda wb, c: wb.set_pool(
        "p", slots=None, per_second="2"), InvalidInput, "not '2'"),  # type: ignore[arg-type]
    ("set_pool: a max_running pool's name", lambda wb, c: wb.set_pool(
        "run:ok", slots=1, per_second=None), InvalidInput, "pool name must match"),
    ("set_pool: name None", lambda wb, c: wb.set_pool(
        None, slots=1, per_second=None), InvalidInput, "pool name"),  # type: ignore[arg-type]
    ("get_pool: unknown pool", lambda wb, c: wb.get_pool("ghost"), PoolNotFound,
     "no pool 'ghost'"),
    ("get_pool: a bad name", lambda wb, c: wb.get_pool("a b"), InvalidInput,
     "pool name must match"),
    ("register: an unknown pool", lambda wb, c: wb.register_workflow(WorkflowDefinition(
        "pooled", (ActivityDefinition("A", launcher=EXT, pool="ghost"),))),
     InvalidDefinition, "pool 'ghost' does not exist"),
    ("register: a wait in a pool", lambda wb, c: wb.register_workflow(WorkflowDefinition(
        "pooled", (ActivityDefinition("T", launcher=LauncherSpec.timer(5), pool="p"),))),
     InvalidDefinition, "takes no pool slot"),
    # Issue 29 item 5: per-key pools.
    ("register: a pool_key that is not JMESPath", lambda wb, c: wb.register_workflow(
        WorkflowDefinition("pooled", (ActivityDefinition(
            "A", launcher=EXT, pool="p", pool_key="input.["),))),
     InvalidDefinition, "pool_key is not valid JMESPath"),
    ("register: a pool_key without a pool", lambda wb, c: wb.register_workflow(
        WorkflowDefinition("pooled", (ActivityDefinition(
            "A", launcher=EXT, pool_key="input.tenant"),))),
     InvalidDefinition, "pool_key needs a pool"),
    ("register: a pool_key reading no upstream", lambda wb, c: wb.register_workflow(
        WorkflowDefinition("pooled", (ActivityDefinition(
            "A", launcher=EXT, pool="p", pool_key="up.tenant"),))),
     InvalidDefinition, "pool_key reads up"),
    ("register: a pool_key that is a number", lambda wb, c: wb.register_workflow(
        WorkflowDefinition("pooled", (ActivityDefinition(
            "A", launcher=EXT, pool="p", pool_key=7),))),  # type: ignore[arg-type]
     InvalidDefinition, "pool_key must be a non-empty JMESPath expression"),
    ("set_pool: a key's name", lambda wb, c: wb.set_pool("p~t1", slots=1, per_second=None),
     InvalidInput, "pool name must match"),
    ("get_pool: a key of an unknown pool", lambda wb, c: wb.get_pool("ghost~t1"),
     PoolNotFound, "no pool 'ghost~t1'"),
    ("register: priority 10", lambda wb, c: wb.register_workflow(WorkflowDefinition(
        "pooled", (ActivityDefinition("A", launcher=EXT, priority=10),))),
     InvalidDefinition, "priority must be an integer from 0"),
    ("register: priority as text", lambda wb, c: wb.register_workflow(WorkflowDefinition(
        "pooled", (ActivityDefinition("A", launcher=EXT, priority="high"),))),  # type: ignore[arg-type]
     InvalidDefinition, "not 'high'"),
    ("register: max_running 0", lambda wb, c: wb.register_workflow(WorkflowDefinition(
        "pooled", (ActivityDefinition("A", launcher=EXT),), max_running=0)),
     InvalidDefinition, "max_running must be an integer from 1"),
    ("register: max_running 2.5", lambda wb, c: wb.register_workflow(WorkflowDefinition(
        "pooled", (ActivityDefinition("A", launcher=EXT),), max_running=2.5)),  # type: ignore[arg-type]
     InvalidDefinition, "not 2.5"),
    ("start: priority 10", lambda wb, c: wb.start_workflow("ok", priority=10), InvalidInput,
     "priority must be an integer from 0"),
    ("start: priority -1", lambda wb, c: wb.start_workflow("ok", priority=-1), InvalidInput,
     "not -1"),
    ("start: priority True", lambda wb, c: wb.start_workflow("ok", priority=True),
     InvalidInput, "not True"),
    ("start: priority '1'", lambda wb, c: wb.start_workflow(
        "ok", priority="1"), InvalidInput, "not '1'"),  # type: ignore[arg-type]
    ("request: priority 2.5", lambda wb, c: wb.request_workflow(
        "ok", priority=2.5), InvalidInput, "not 2.5"),  # type: ignore[arg-type]
]


def _forged_cursor(wb: Whimbrel, **fields: Any) -> str:
    """A cursor ``list_workflows(limit=1)`` returned, with ``fields`` replaced (its filter
    fingerprint stays valid, so only the forged values can make it fail)."""
    cursor = wb.list_workflows(limit=1).cursor
    assert cursor is not None, "the corpus' tables hold more than one run"
    body = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    body.update(fields)
    raw = json.dumps(body, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _setup(wb: Whimbrel) -> dict[str, str]:
    # One half of a cycle (issue 20): registering cyc_b, whose child is cyc_a, closes it.
    wb.register_workflow(WorkflowDefinition("cyc_a", (ActivityDefinition(
        "sub", launcher=LauncherSpec.workflow("cyc_b")),)))
    wb.register_workflow(WorkflowDefinition("ok", (
        ActivityDefinition("A", launcher=EXT), ActivityDefinition("B", launcher=EXT),
        ActivityDefinition("C", ("A",), launcher=EXT))))
    wx = wb.start_workflow("ok", {"keep": "me"}, request_id="bystander")
    wb.transition_activity(activity_exec_id(wx, "A", 1), "RUNNING")
    waits, ended = waiting_runs(wb)
    return {"wx": wx, "running": activity_exec_id(wx, "A", 1),
            "ready": activity_exec_id(wx, "B", 1), "waits": waits, "ended": ended,
            "gate": activity_exec_id(waits, "G", 1)}


@pytest.fixture
def ctx(rwb: Whimbrel) -> dict[str, str]:
    return _setup(rwb)


@pytest.fixture(scope="module")
def shared(module_ddb_endpoint: str) -> Iterator[tuple[Whimbrel, dict[str, str]]]:
    """One set of tables for all of ``test_boundary_checks`` (creating tables is slow)."""
    wb = Whimbrel(endpoint_url=module_ddb_endpoint, table_prefix=fresh_table_prefix(),
                  clock=StepClock())
    wb.create_tables()
    yield wb, _setup(wb)
    wb.close()


def test_bad_api_calls(rwb: Whimbrel, ctx: dict[str, str]) -> None:
    wb = rwb
    assert len(CORPUS) + 26 >= 30
    wrong = corpus_findings(CORPUS, (wb, ctx), lambda: snapshot(wb))
    assert wrong == [], "\n".join(wrong)
    print(f"\nbad API calls tried here: {len(CORPUS)} (+26 in test_bad_input.py)")
    # The engine keeps going: the bystander finishes.
    for name in ("A", "B", "C"):
        aeid = activity_exec_id(ctx["wx"], name, 1)
        if wb.get_activity(aeid).state.value != "RUNNING":
            wb.transition_activity(aeid, "RUNNING")
        wb.transition_activity(aeid, "COMPLETED")
    assert wb.get_workflow(ctx["wx"]).state.value == "COMPLETED"


@pytest.mark.parametrize(("call", "expected", "words"), [
    pytest.param(lambda wb, c: wb.register_workflow("name: x"), InvalidInput, "WorkflowDefinition",
                 id="register a str"),
    pytest.param(lambda wb, c: wb.register_workflow(None), InvalidInput, "WorkflowDefinition",
                 id="register None"),
    pytest.param(lambda wb, c: wb.start_workflow("ok", source=object()), InvalidInput,
                 "source", id="start with a source that is no string"),
    pytest.param(lambda wb, c: wb.start_workflow("ok", version="1"), InvalidInput, "version",
                 id="start with version '1'"),
    pytest.param(lambda wb, c: wb.start_workflow("ok", version=True), InvalidInput, "version",
                 id="start with version True"),
    pytest.param(lambda wb, c: wb.get_workflow(None), InvalidInput, "workflow_exec_id",
                 id="get_workflow None"),
    pytest.param(lambda wb, c: wb.cancel_workflow(""), InvalidInput, "workflow_exec_id",
                 id="cancel ''"),
    pytest.param(lambda wb, c: wb.get_workflow({"a": 1}), InvalidInput, "workflow_exec_id",
                 id="get_workflow a dict"),
    pytest.param(lambda wb, c: wb.get_definition("ok", "1"), InvalidInput, "version",
                 id="get_definition version '1'"),
    pytest.param(lambda wb, c: wb.get_definition(None), InvalidInput, "workflow_name",
                 id="get_definition None"),
    pytest.param(lambda wb, c: wb.send_activity_event(c["running"], "TIME_OUT"), InvalidInput,
                 "TIME_OUT", id="send_activity_event TIME_OUT"),
    pytest.param(lambda wb, c: wb.request_workflow("o\ud800k"), InvalidInput, "workflow_name",
                 id="request_workflow lone surrogate name"),
    pytest.param(lambda wb, c: wb.list_rejections("yesterday"), InvalidInput, "day",
                 id="list_rejections 'yesterday'"),
    pytest.param(lambda wb, c: wb.list_rejections(limit=-1), InvalidInput, "limit",
                 id="list_rejections limit -1"),
    pytest.param(lambda wb, c: wb.sweep("now"), InvalidInput, "now", id="sweep at 'now'"),
    pytest.param(lambda wb, c: wb.claim(workflow_name=5), InvalidInput, "workflow_name",
                 id="claim workflow_name 5"),
])
def test_boundary_checks(shared: tuple[Whimbrel, dict[str, str]], call: Any,
                    expected: type[WhimbrelError], words: str) -> None:
    wb, ctx = shared
    before = snapshot(wb)
    try:
        with pytest.raises(expected) as err:
            call(wb, ctx)
        assert words in str(err.value)
    finally:
        # Whatever is raised, nothing stored may change.
        after = snapshot(wb)
    assert after == before
