"""Bad input corpus of data-driven workflows (issue 14): definitions with maps,
handlers and child workflows, and the calls on runs and attempts they add. Each input
gets a Whimbrel error naming the problem, and nothing stored changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stream_records import corpus_findings

from whimbrel import (
    ActivityDefinition,
    EngineDriven,
    LauncherSpec,
    RedriveNotAllowed,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.contract.errors import (
    ActivityNotFound,
    InvalidDefinition,
    InvalidInput,
    WhimbrelError,
    WorkflowNotFound,
)
from whimbrel.contract.ids import activity_exec_id
from whimbrel.testing import assert_contract_holds

EXT = LauncherSpec.external()
Case = tuple[str, Callable[[Whimbrel, dict[str, str]], Any], type[WhimbrelError], str]
D = WorkflowDefinition.from_dict


def acts(*items: dict[str, Any]) -> dict[str, Any]:
    return {"name": "wf", "activities": [{"name": "L"}, *items]}


def mapped(**over: Any) -> dict[str, Any]:
    return acts({"name": "M", "depends_on": ["L"], "map_over": "L", **over})


def handled(*extra: dict[str, Any], **over: Any) -> dict[str, Any]:
    return acts({"name": "X", "on_failure": "H", **over}, {"name": "H"}, *extra)


def child(**launcher: Any) -> dict[str, Any]:
    return acts({"name": "C", "launcher": {"type": "workflow", **launcher}})


CORPUS: list[Case] = [
    # -- maps ------------------------------------------------------------------------------
    ("map_over empty", lambda wb, c: D(mapped(map_over="")), InvalidDefinition,
     "map_over must be a non-empty string"),
    ("map_over with an empty key", lambda wb, c: D(mapped(map_over="L..keys")),
     InvalidDefinition, "has an empty name or key"),
    ("map_over a number", lambda wb, c: D(mapped(map_over=5)), InvalidDefinition,
     "map_over must be a non-empty string"),
    ("map_over an activity not depended on", lambda wb, c: D(acts(
        {"name": "M", "map_over": "L.keys"})), InvalidDefinition, "not in its depends_on"),
    ("max_concurrency 0", lambda wb, c: D(mapped(max_concurrency=0)), InvalidDefinition,
     "max_concurrency must be an integer from 1"),
    ("max_concurrency true", lambda wb, c: D(mapped(max_concurrency=True)), InvalidDefinition,
     "max_concurrency must be an integer"),
    ("max_concurrency 200,000", lambda wb, c: D(mapped(max_concurrency=200_000)),
     InvalidDefinition, "from 1 to 100000"),
    ("tolerated_failures negative", lambda wb, c: D(mapped(tolerated_failures=-1)),
     InvalidDefinition, "tolerated_failures must be an integer from 0"),
    ("tolerated_failures as text", lambda wb, c: D(mapped(tolerated_failures="some")),
     InvalidDefinition, "tolerated_failures"),
    ("max_concurrency without map_over", lambda wb, c: D(acts(
        {"name": "M", "max_concurrency": 3})), InvalidDefinition, "apply to a map only"),
    # -- handlers --------------------------------------------------------------------------
    ("on_failure unknown", lambda wb, c: D(acts({"name": "X", "on_failure": "nobody"})),
     InvalidDefinition, "names unknown activity 'nobody'"),
    ("on_failure itself", lambda wb, c: D(acts({"name": "X", "on_failure": "X"})),
     InvalidDefinition, "on_failure names itself"),
    ("on_failure a number", lambda wb, c: D(acts({"name": "X", "on_failure": 7})),
     InvalidDefinition, "on_failure must be an activity name or 'continue'"),
    ("handler with depends_on", lambda wb, c: D(acts(
        {"name": "X", "on_failure": "H"}, {"name": "H", "depends_on": ["L"]})),
     InvalidDefinition, "cannot have depends_on"),
    ("handler depended on", lambda wb, c: D(handled({"name": "Y", "depends_on": ["H"]})),
     InvalidDefinition, "cannot be in another activity's depends_on"),
    ("one handler for two", lambda wb, c: D(handled({"name": "Z", "on_failure": "H"})),
     InvalidDefinition, "already handles"),
    ("handler that is a map", lambda wb, c: D(acts(
        {"name": "X", "on_failure": "H"}, {"name": "H", "map_over": "$input.xs"})),
     InvalidDefinition, "cannot be a map"),
    ("handlers handling each other", lambda wb, c: D({"name": "wf", "activities": [
        {"name": "L"}, {"name": "A", "on_failure": "B"}, {"name": "B", "on_failure": "A"}]}),
     InvalidDefinition, "on_failure cycle"),
    # -- child workflows and retries --------------------------------------------------------
    ("workflow launcher without a name", lambda wb, c: D(child()), InvalidDefinition,
     "launcher 'workflow' needs 'workflow'"),
    ("workflow launcher with a bad name", lambda wb, c: D(child(workflow="a b")),
     InvalidDefinition, "not a workflow name"),
    ("workflow launcher version 0", lambda wb, c: D(child(workflow="k", version=0)),
     InvalidDefinition, "version must be an integer >= 1"),
    ("workflow launcher unknown setting", lambda wb, c: D(child(workflow="k", region="x")),
     InvalidDefinition, "unknown setting(s) region"),
    ("child with a heartbeat", lambda wb, c: D(acts({"name": "C", "launcher": "workflow:k",
                                                     "heartbeat_timeout_seconds": 5})),
     InvalidDefinition, "does not heartbeat"),
    ("non_retryable not a list of names", lambda wb, c: D(acts(
        {"name": "X", "retry": {"non_retryable": [1, ""]}})), InvalidDefinition,
     "retry.non_retryable must be a list of error type names"),
    # -- calls -----------------------------------------------------------------------------
    ("redrive an unknown run", lambda wb, c: wb.redrive_workflow("no-such-run"),
     WorkflowNotFound, "no-such-run"),
    ("redrive a RUNNING run", lambda wb, c: wb.redrive_workflow(c["wx"]), RedriveNotAllowed,
     "is RUNNING"),
    ("redrive a COMPLETED run", lambda wb, c: wb.redrive_workflow(c["done_wx"]),
     RedriveNotAllowed, "is COMPLETED"),
    ("redrive an id that is not a string", lambda wb, c: wb.redrive_workflow(7),  # type: ignore[arg-type]
     InvalidInput, "workflow_exec_id"),
    ("redrive an empty id", lambda wb, c: wb.redrive_workflow(""), InvalidInput,
     "workflow_exec_id"),
    ("complete a map's own row", lambda wb, c: wb.transition_activity(
        c["map"], "COMPLETED", output=[]), EngineDriven, "is a map"),
    ("cancel a map's own row", lambda wb, c: wb.transition_activity(c["map"], "CANCEL"),
     EngineDriven, "its items decide its end"),
    ("complete a child's attempt", lambda wb, c: wb.transition_activity(
        c["child"], "COMPLETED"), EngineDriven, "runs a child workflow"),
    ("an item that was never created", lambda wb, c: wb.transition_activity(
        activity_exec_id(c["wx"], "M#99", 1), "RUNNING"), ActivityNotFound, "M#99"),
    ("error_type not a string", lambda wb, c: wb.transition_activity(
        c["item"], "FAILED", error="x", error_type=5), InvalidInput,  # type: ignore[arg-type]
     "error_type"),
]


def test_bad_data_driven_input(rwb: Whimbrel) -> None:
    wb = rwb
    wb.register_workflow(WorkflowDefinition("kid", (ActivityDefinition("K", launcher=EXT),)))
    defn = WorkflowDefinition("held", (
        ActivityDefinition("M", launcher=EXT, map_over="$input.xs", max_concurrency=1),
        ActivityDefinition("C", launcher=LauncherSpec.workflow("kid")),
    ))
    wb.register_workflow(defn)
    wb.register_workflow(WorkflowDefinition("quick", (ActivityDefinition("Q", launcher=EXT),)))
    wx = wb.start_workflow("held", {"xs": [1, 2]})
    done_wx = wb.start_workflow("quick")
    quick = activity_exec_id(done_wx, "Q", 1)
    wb.transition_activity(quick, "RUNNING")
    wb.transition_activity(quick, "COMPLETED")
    item = activity_exec_id(wx, "M#0", 1)
    wb.transition_activity(item, "RUNNING")
    ctx = {"wx": wx, "done_wx": done_wx, "map": activity_exec_id(wx, "M", 1),
           "child": activity_exec_id(wx, "C", 1), "item": item}
    wrong = corpus_findings(CORPUS, (wb, ctx), lambda: [wb.get_workflow(wx),
                                                        wb.get_workflow(done_wx)])
    assert wrong == [], "\n".join(wrong)
    print(f"\nbad data-driven inputs tried: {len(CORPUS)}")
    # The run goes on: the items, then the child.
    wb.transition_activity(item, "COMPLETED")
    second = activity_exec_id(wx, "M#1", 1)
    wb.transition_activity(second, "RUNNING")
    wb.transition_activity(second, "COMPLETED")
    [kid] = wb.get_workflow(wx).child_workflow_exec_ids
    k = activity_exec_id(kid, "K", 1)
    wb.transition_activity(k, "RUNNING")
    wb.transition_activity(k, "COMPLETED")
    wf = wb.get_workflow(wx)
    assert wf.state is WorkflowState.COMPLETED
    assert_contract_holds(wf, defn)
