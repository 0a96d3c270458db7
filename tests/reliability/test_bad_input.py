"""Bad input corpus (issue 5, part 5) for the Full Logic API, definitions and engine
entry points: each input gets a Whimbrel error naming the problem, nothing already
stored changes, and the engine keeps working afterwards.

(Request/event items through the Lambda handlers and CLI arguments have their own
corpus with those adapters.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from stream_records import corpus_findings

from whimbrel import (
    ActivityDefinition,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.errors import (
    ActivityNotFound,
    DefinitionNotFound,
    IllegalTransition,
    InvalidDefinition,
    InvalidInput,
    RequestIdReused,
    StateConflict,
    UpstreamNotCompleted,
    WhimbrelError,
    WorkflowNotFound,
)
from whimbrel.contract.ids import activity_exec_id
from whimbrel.contract.states import Transition
from whimbrel.testing import assert_contract_holds

EXT = LauncherSpec.external()
OK_ACT = {"name": "A", "launcher": "external"}


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"k": value}
    return value


def definition(**over: Any) -> dict[str, Any]:
    return {"name": "wf", "activities": [dict(OK_ACT)], **over}


#: (label, call(wb, ctx), expected error class, words the message must contain)
Case = tuple[str, Callable[[Whimbrel, dict[str, str]], Any], type[WhimbrelError], str]

D = WorkflowDefinition.from_dict
CORPUS: list[Case] = [
    # -- definitions ----------------------------------------------------------------
    ("definition not a mapping", lambda wb, c: D([1, 2]), InvalidDefinition, "mapping"),  # type: ignore[arg-type]
    ("activities missing", lambda wb, c: D({"name": "wf"}), InvalidDefinition,
     "activities must be a list"),
    ("activities a string", lambda wb, c: D({"name": "wf", "activities": "A"}),
     InvalidDefinition, "activities must be a list"),
    ("activity not a mapping", lambda wb, c: D({"name": "wf", "activities": [7]}),
     InvalidDefinition, "activities[0] must be a mapping"),
    ("no activities", lambda wb, c: D({"name": "wf", "activities": []}), InvalidDefinition,
     "at least one activity"),
    ("unknown workflow field", lambda wb, c: D(definition(bogus=1)), InvalidDefinition,
     "unknown field(s) bogus"),
    ("unknown activity field", lambda wb, c: D(definition(activities=[{**OK_ACT, "x": 1}])),
     InvalidDefinition, "unknown field(s) x"),
    ("workflow name starts with a digit", lambda wb, c: D(definition(name="1wf")),
     InvalidDefinition, "workflow name"),
    ("workflow name not a string", lambda wb, c: D(definition(name=42)), InvalidDefinition,
     "workflow name"),
    ("odd Unicode workflow name (RTL override)", lambda wb, c: D(definition(name="wf\u202eexe")),
     InvalidDefinition, "workflow name"),
    ("activity name with a colon", lambda wb, c: D(definition(
        activities=[{**OK_ACT, "name": "a:b"}])), InvalidDefinition, "name must match"),
    ("emoji activity name", lambda wb, c: D(definition(
        activities=[{**OK_ACT, "name": "\U0001f426"}])), InvalidDefinition, "name must match"),
    ("duplicate activity", lambda wb, c: D(definition(activities=[OK_ACT, OK_ACT])),
     InvalidDefinition, "duplicate"),
    ("depends on itself", lambda wb, c: D(definition(
        activities=[{**OK_ACT, "depends_on": ["A"]}])), InvalidDefinition, "depends on itself"),
    ("unknown dependency", lambda wb, c: D(definition(
        activities=[{**OK_ACT, "depends_on": ["Z"]}])), InvalidDefinition, "unknown activity"),
    ("dependency not a list", lambda wb, c: D(definition(
        activities=[{**OK_ACT, "depends_on": 5}])), InvalidDefinition, "depends_on"),
    ("cycle", lambda wb, c: D(definition(activities=[
        {"name": "A", "depends_on": ["C"]}, {"name": "B", "depends_on": ["A"]},
        {"name": "C", "depends_on": ["B"]}])), InvalidDefinition, "cycle"),
    ("unknown launcher", lambda wb, c: D(definition(activities=[{**OK_ACT, "launcher": "ftp"}])),
     InvalidDefinition, "unknown launcher type"),
    ("python target malformed", lambda wb, c: D(definition(
        activities=[{**OK_ACT, "launcher": "python:rm -rf /"}])), InvalidDefinition,
     "module:function"),
    ("command argv not strings", lambda wb, c: D(definition(
        activities=[{**OK_ACT, "launcher": {"type": "command", "argv": [1, {"a": 2}]}}])),
     InvalidDefinition, "argv"),
    ("retry max_attempts 0", lambda wb, c: D(definition(
        activities=[{**OK_ACT, "retry": {"max_attempts": 0}}])), InvalidDefinition,
     "max_attempts"),
    ("retry not a mapping", lambda wb, c: D(definition(activities=[{**OK_ACT, "retry": 5}])),
     InvalidDefinition, "retry"),
    ("retry unknown key", lambda wb, c: D(definition(
        activities=[{**OK_ACT, "retry": {"forever": True}}])), InvalidDefinition, "forever"),
    ("negative heartbeat", lambda wb, c: D(definition(
        activities=[{**OK_ACT, "heartbeat_timeout_seconds": -1}])), InvalidDefinition,
     "heartbeat_timeout_seconds"),
    ("heartbeat as text", lambda wb, c: D(definition(
        activities=[{**OK_ACT, "heartbeat_timeout_seconds": "ten"}])), InvalidDefinition,
     "heartbeat_timeout_seconds"),
    ("start_to_close as text", lambda wb, c: D(definition(
        activities=[{**OK_ACT, "start_to_close_seconds": "an hour"}])), InvalidDefinition,
     "start_to_close_seconds must be a number > 0"),
    ("schedule_to_start zero", lambda wb, c: D(definition(
        activities=[{**OK_ACT, "schedule_to_start_seconds": 0}])), InvalidDefinition,
     "schedule_to_start_seconds must be a number > 0"),
    ("workflow timeout negative", lambda wb, c: D(definition(timeout_seconds=-5)),
     InvalidDefinition, "timeout_seconds must be a number > 0"),
    ("retention under a day", lambda wb, c: D(definition(retention_days=0.5)),
     InvalidDefinition, "retention_days must be a number >= 1"),
    ("retention as a word", lambda wb, c: D(definition(retention_days="forever")),
     InvalidDefinition, "retention_days"),
    ("huge fan-out (2001 activities)", lambda wb, c: D(definition(
        activities=[{"name": f"A{i}"} for i in range(2001)])), InvalidDefinition,
     "more than the limit"),
    ("oversized description", lambda wb, c: D(definition(description="x" * 5000)),
     InvalidDefinition, "description is longer"),
    ("definition not JSON", lambda wb, c: WorkflowDefinition.from_json("{nope"),
     InvalidDefinition, "not valid JSON"),
    ("definition not YAML", lambda wb, c: WorkflowDefinition.from_yaml("a: [b"),
     InvalidDefinition, "not valid YAML"),
    ("YAML scalar", lambda wb, c: WorkflowDefinition.from_yaml("just text"), InvalidDefinition,
     "mapping"),
    ("register an invalid definition object", lambda wb, c: wb.register_workflow(
        WorkflowDefinition("wf", (ActivityDefinition("A", ("A",), launcher=EXT),))),
     InvalidDefinition, "depends on itself"),
    # -- issue 22: pools, max_running, priority in YAML -------------------------------------
    ("YAML pool with a space", lambda wb, c: WorkflowDefinition.from_yaml(
        "name: p\nactivities:\n  - {name: a, pool: 'my pool'}\n"), InvalidDefinition,
     "pool must be a name matching"),
    ("YAML pool a number", lambda wb, c: WorkflowDefinition.from_yaml(
        "name: p\nactivities:\n  - {name: a, pool: 7}\n"), InvalidDefinition, "not 7"),
    ("YAML priority 11", lambda wb, c: WorkflowDefinition.from_yaml(
        "name: p\nactivities:\n  - {name: a, priority: 11}\n"), InvalidDefinition,
     "priority must be an integer from 0"),
    ("YAML priority true", lambda wb, c: WorkflowDefinition.from_yaml(
        "name: p\nactivities:\n  - {name: a, priority: true}\n"), InvalidDefinition,
     "not True"),
    ("YAML max_running -3", lambda wb, c: WorkflowDefinition.from_yaml(
        "name: p\nmax_running: -3\nactivities:\n  - {name: a}\n"), InvalidDefinition,
     "max_running must be an integer from 1"),
    ("YAML max_running as text", lambda wb, c: WorkflowDefinition.from_yaml(
        "name: p\nmax_running: ten\nactivities:\n  - {name: a}\n"), InvalidDefinition,
     "not 'ten'"),
    ("JSON pool that does not exist", lambda wb, c: wb.register_workflow(
        WorkflowDefinition.from_json('{"name": "p", "activities": [{"name": "a", '
                                     '"pool": "nowhere"}]}')), InvalidDefinition,
     "pool 'nowhere' does not exist"),
    # -- start -------------------------------------------------------------------------
    ("start unknown workflow", lambda wb, c: wb.start_workflow("nope"), DefinitionNotFound,
     "'nope'"),
    ("start unknown version", lambda wb, c: wb.start_workflow("ok", version=99),
     DefinitionNotFound, "version 99"),
    ("start empty name", lambda wb, c: wb.start_workflow(""), InvalidInput, "workflow_name"),
    ("start name not a string", lambda wb, c: wb.start_workflow(None), InvalidInput,  # type: ignore[arg-type]
     "workflow_name"),
    ("input not JSON", lambda wb, c: wb.start_workflow("ok", {"s": {1, 2}}), InvalidInput,
     "not JSON-serialisable"),
    ("input NaN", lambda wb, c: wb.start_workflow("ok", {"x": math.nan}), InvalidInput,
     "not JSON-serialisable"),
    ("input oversized", lambda wb, c: wb.start_workflow("ok", "x" * 200_000), InvalidInput,
     "more than the limit"),
    ("input nested 200 deep", lambda wb, c: wb.start_workflow("ok", nested(200)), InvalidInput,
     "nested deeper"),
    ("request id reused for another workflow", lambda wb, c: wb.start_workflow(
        "other", request_id=c["request"]), InvalidInput, "already stands for run"),
    ("request id reused with another input (issue 31)", lambda wb, c: wb.start_workflow(
        "ok", {"keep": "another"}, request_id=c["request"]), RequestIdReused,
     "with another input"),
    # -- transitions and reads ------------------------------------------------------------
    ("activity id malformed", lambda wb, c: wb.transition_activity("nope", "COMPLETED"),
     InvalidInput, "activity_exec_id"),
    ("activity id not a string", lambda wb, c: wb.get_activity(12345),  # type: ignore[arg-type]
     InvalidInput, "activity_exec_id"),
    ("activity id attempt 0", lambda wb, c: wb.get_activity(f"{c['wx']}:A:0"), InvalidInput,
     "activity_exec_id"),
    ("activity id oversized", lambda wb, c: wb.get_activity(f"{c['wx']}:{'A' * 2000}:1"),
     WhimbrelError, "activity"),
    ("unknown activity", lambda wb, c: wb.transition_activity(f"{c['wx']}:Z:1", "COMPLETED"),
     ActivityNotFound, ":Z:1"),
    ("unknown verb", lambda wb, c: wb.transition_activity(c["done"], "EXPLODE"), InvalidInput,
     "EXPLODE"),
    ("complete a finished activity", lambda wb, c: wb.transition_activity(
        c["done"], Transition.COMPLETED), StateConflict, "COMPLETED"),
    ("complete before running", lambda wb, c: wb.transition_activity(c["ready"], "COMPLETED"),
     IllegalTransition, "READY"),
    ("time-out a READY activity", lambda wb, c: wb.transition_activity(c["ready"], "TIME_OUT"),
     IllegalTransition, "TIME_OUT"),
    ("time-out a RUNNING activity", lambda wb, c: wb.transition_activity(
        c["running"], "TIME_OUT"), IllegalTransition, "only by the heartbeat listener"),
    ("READY before the upstream completed", lambda wb, c: wb.transition_activity(
        c["requested"], "READY"), UpstreamNotCompleted, "C (RUNNING)"),
    ("QUEUED before the upstream completed", lambda wb, c: wb.transition_activity(
        c["requested"], "QUEUED"), UpstreamNotCompleted, "have not COMPLETED"),
    ("retention of no days", lambda wb, c: Whimbrel(
        endpoint_url=wb.endpoint_url, table_prefix=wb.table_prefix, retention_days=0),
     InvalidInput, "retention_days must be at least 1 day"),
    ("output not JSON", lambda wb, c: wb.transition_activity(
        c["running"], "COMPLETED", output=object()), InvalidInput, "output"),
    ("output oversized", lambda wb, c: wb.transition_activity(
        c["running"], "COMPLETED", output="y" * 100_000), InvalidInput, "output"),
    ("output nested 100 deep", lambda wb, c: wb.transition_activity(
        c["running"], "COMPLETED", output=nested(100)), InvalidInput, "nested deeper"),
    ("heartbeat a READY activity", lambda wb, c: wb.heartbeat(c["ready"]), StateConflict,
     "READY"),
    ("heartbeat an unknown activity", lambda wb, c: wb.heartbeat(f"{c['wx']}:Q:1"),
     WhimbrelError, ":Q:1"),
    ("cancel unknown workflow", lambda wb, c: wb.cancel_workflow("no-such-id"),
     WorkflowNotFound, "no-such-id"),
    ("get unknown workflow (odd Unicode)", lambda wb, c: wb.get_workflow("\u0000\ufeff\U0001f426"),
     WhimbrelError, "workflow"),
]


def _snapshot(wb: Whimbrel, wxs: list[str]) -> Any:
    views = [wb.get_workflow(wx) for wx in wxs]
    defs = sorted((d.workflow_name, int(d.version), d.definition)
                  for d in wb.store.cold.list_definitions())
    return views, defs


def test_bad_input_corpus(rwb: Whimbrel) -> None:
    wb = rwb
    ok = WorkflowDefinition("ok", (ActivityDefinition("A", launcher=EXT),
                                   ActivityDefinition("B", ("A",), launcher=EXT),
                                   ActivityDefinition("C", launcher=EXT),
                                   ActivityDefinition("D", launcher=EXT,
                                                      retry=RetryPolicy(max_attempts=2)),
                                   ActivityDefinition("E", ("C",), launcher=EXT)))
    wb.register_workflow(ok)
    wb.register_workflow(WorkflowDefinition("other", (ActivityDefinition("A", launcher=EXT),)))
    wx = wb.start_workflow("ok", {"keep": "me"}, request_id="bystander")
    wb.transition_activity(activity_exec_id(wx, "A", 1), "RUNNING")
    wb.transition_activity(activity_exec_id(wx, "A", 1), "COMPLETED", output={"a": 1})
    wb.transition_activity(activity_exec_id(wx, "C", 1), "RUNNING")
    ctx = {"wx": wx, "request": "bystander", "done": activity_exec_id(wx, "A", 1),
           "ready": activity_exec_id(wx, "B", 1), "running": activity_exec_id(wx, "C", 1),
           "requested": activity_exec_id(wx, "E", 1)}
    assert len(CORPUS) >= 30
    wrong = corpus_findings(CORPUS, (wb, ctx), lambda: _snapshot(wb, [wx]))
    assert wrong == [], "\n".join(wrong)
    print(f"\nbad inputs tried: {len(CORPUS)}")
    # The engine keeps going: the bystander finishes normally.
    for name in ("B", "C", "D", "E"):
        aeid = activity_exec_id(wx, name, 1)
        if wb.get_activity(aeid).state.value != "RUNNING":
            wb.transition_activity(aeid, "RUNNING")
        wb.transition_activity(aeid, "COMPLETED")
    wf = wb.get_workflow(wx)
    assert wf.state is WorkflowState.COMPLETED
    assert wf.input == {"keep": "me"}
    assert_contract_holds(wf, ok)


@pytest.mark.parametrize("text", ["", "   ", "null", "[]", "42", "\ufeff{}"])
def test_definition_text_that_is_not_a_definition(text: str) -> None:
    with pytest.raises(InvalidDefinition):
        WorkflowDefinition.from_yaml(text)
