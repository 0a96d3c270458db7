"""Issue 22's pure layer: flow-control fields of definitions, conditions and inputs from
data, skip propagation, priority with aging, schedules and pools. No I/O, no clock."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from whimbrel.contract import definitions as defs_module
from whimbrel.contract.conditions import (
    Decision,
    Outcome,
    Trigger,
    build_input,
    compile_expression,
    decide,
    document,
    evaluate_when,
    expression_problem,
    run_completes,
    truthy,
)
from whimbrel.contract.definitions import ActivityDefinition, WorkflowDefinition
from whimbrel.contract.errors import InvalidDefinition, InvalidInput
from whimbrel.contract.priority import (
    AGING_SECONDS,
    check_priority,
    effective_priority,
    order_key,
    sort_key,
    sort_key_text,
)


@pytest.fixture
def flow_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(defs_module, "FLOW_CONTROL_ENABLED", True)


def _wf(*acts: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"name": "wf", "activities": list(acts), **top}


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidDefinition) as info:
        WorkflowDefinition.from_dict(data)
    return list(info.value.problems)


BRANCHES = _wf(
    {"name": "charge", "launcher": "external"},
    {"name": "refund", "launcher": "external", "depends_on": ["charge"],
     "when": "charge.status == 'declined'", "pool": "payments", "priority": 2,
     "input_from": {"charge_id": "charge.id", "currency": "input.currency"}},
    {"name": "ship", "launcher": "external", "depends_on": ["charge"],
     "when": "charge.status != 'declined'"},
    {"name": "notify", "launcher": "external", "depends_on": ["refund", "ship"],
     "trigger": "none_failed"},
    max_running=3,
)


# -- definitions: the switch -------------------------------------------------------------

def test_switch_off_refuses_every_flow_field_naming_it() -> None:
    problems = _problems(BRANCHES)
    assert len(problems) == 1
    text = problems[0]
    assert text.startswith("not supported yet")
    for part in ("max_running", "'refund': pool", "'refund': priority", "'refund': when",
                 "'refund': input_from", "'notify': trigger"):
        assert part in text


def test_switch_off_keeps_plain_definitions_and_their_canonical_json() -> None:
    plain = _wf({"name": "a", "launcher": "external"},
                {"name": "b", "launcher": "external", "depends_on": ["a"]})
    defn = WorkflowDefinition.from_dict(plain)
    text = defn.to_json()
    for field in ("max_running", "pool", "priority", "when", "trigger", "input_from"):
        assert field not in text
    # Defaults written explicitly are no use of flow control.
    explicit = _wf({"name": "a", "launcher": "external", "priority": 5,
                    "trigger": "all_completed", "input_from": {}, "pool": None})
    assert WorkflowDefinition.from_dict(explicit).activities[0].priority == 5


def test_switch_on_round_trips_yaml_and_json(flow_on: None) -> None:
    defn = WorkflowDefinition.from_dict(BRANCHES)
    assert defn.max_running == 3
    refund = defn.activity("refund")
    assert (refund.pool, refund.priority, refund.trigger) == ("payments", 2, "all_completed")
    assert refund.input_from == {"charge_id": "charge.id", "currency": "input.currency"}
    assert defn.activity("notify").trigger == Trigger.NONE_FAILED
    again = WorkflowDefinition.from_json(defn.to_json())
    assert again == defn and again.to_json() == defn.to_json()
    import yaml
    assert WorkflowDefinition.from_yaml(yaml.safe_dump(defn.to_dict())) == defn


@pytest.mark.parametrize(("change", "needle"), [
    ({"pool": "bad name"}, "pool must be a name"),
    ({"pool": 3}, "pool must be a name"),
    ({"priority": 10}, "priority must be an integer from 0"),
    ({"priority": -1}, "priority must be an integer from 0"),
    ({"priority": True}, "priority must be an integer from 0"),
    ({"trigger": "any"}, "trigger must be one of all_completed, none_failed"),
    ({"when": "charge.["}, "when is not valid JMESPath at position 8"),
    ({"when": "charge bar"}, "position 7: unexpected 'bar'"),
    ({"when": ""}, "when must be a non-empty JMESPath expression"),
    ({"when": "nope(charge)"}, "unknown function nope()"),
    ({"when": "length(charge, charge)"}, "length() takes 1 argument(s), not 2"),
    ({"when": "other.x"}, "reads other, which is neither 'input' nor an activity"),
    ({"input_from": {"k": "a ~ b"}}, "input_from['k'] is not valid JMESPath at position 2"),
    ({"input_from": {"k": "missing"}}, "input_from['k'] reads missing"),
    ({"input_from": {"": "input"}}, "input_from key '' must be non-empty"),
    ({"input_from": ["input"]}, "input_from must be a mapping"),
])
def test_switch_on_refuses_bad_fields(flow_on: None, change: dict[str, Any],
                                      needle: str) -> None:
    data = _wf({"name": "charge", "launcher": "external"},
               {"name": "x", "launcher": "external", "depends_on": ["charge"], **change})
    problems = _problems(data)
    assert any(needle in p for p in problems), problems


def test_switch_on_graph_rules(flow_on: None) -> None:
    assert any("needs at least one upstream" in p for p in _problems(
        _wf({"name": "a", "launcher": "external", "trigger": "none_failed"})))
    assert any("upstream named 'input'" in p for p in _problems(
        _wf({"name": "input", "launcher": "external"},
            {"name": "b", "launcher": "external", "depends_on": ["input"],
             "when": "input.x"})))
    assert any("failure handler runs when called on" in p for p in _problems(
        _wf({"name": "a", "launcher": "external", "on_failure": "h"},
            {"name": "h", "launcher": "external", "when": "input.x"})))
    for bad in (0, -2, 1.5, True, "3"):
        assert any("max_running must be an integer from 1" in p
                   for p in _problems(_wf({"name": "a", "launcher": "external"},
                                          max_running=bad)))
    # Reading inside a projection or a function's expref is not reading the document.
    ok = _wf({"name": "a", "launcher": "external"},
             {"name": "b", "launcher": "external", "depends_on": ["a"],
              "when": "a.items[?kind == 'x'] | length(@) > `0` && "
                      "max_by(a.items, &size).size > `3`"})
    assert WorkflowDefinition.from_dict(ok).activity("b").when is not None


def test_a_map_may_have_a_condition(flow_on: None) -> None:
    defn = WorkflowDefinition.from_dict(_wf(
        {"name": "list", "launcher": "external"},
        {"name": "each", "launcher": "external", "depends_on": ["list"],
         "map_over": "list", "when": "length(list) > `0`"}))
    assert defn.activity("each#3").when == "length(list) > `0`"


def test_dataclass_defaults_and_mapping_input_from() -> None:
    from types import MappingProxyType
    act = ActivityDefinition("a", input_from=MappingProxyType({"k": "input"}))  # type: ignore[arg-type]
    assert act.input_from == {"k": "input"} and isinstance(act.input_from, dict)
    plain = ActivityDefinition("b")
    assert (plain.pool, plain.priority, plain.when, plain.trigger, plain.input_from) == \
        (None, 5, None, "all_completed", {})


# -- conditions and inputs -----------------------------------------------------------------

DOC = document({"currency": "EUR", "weekday": 6},
               {"charge": {"id": "ch_1", "status": "declined", "lines": []}})


@pytest.mark.parametrize(("expr", "expected"), [
    ("charge.status == 'declined'", True),
    ("charge.status == 'ok'", False),
    ("charge.lines", False),             # an empty list is false
    ("charge.missing", False),           # null is false
    ("`0`", True),                       # 0 is true in JMESPath
    ("`\"\"`", False),
    ("`{}`", False),
    ("input.weekday < `5`", False),      # skip the backfill on weekends
    ("input", True),
])
def test_evaluate_when(expr: str, expected: bool) -> None:
    assert evaluate_when(expr, DOC) is expected


def test_truthy_matches_jmespath_or() -> None:
    import jmespath
    for value in (None, False, True, 0, 1, "", "x", [], [0], {}, {"a": 1}, 0.0):
        # `a || b` yields b exactly when a is false in JMESPath.
        picked = jmespath.search("a || b", {"a": value, "b": "fallback"})
        assert truthy(value) is (picked != "fallback"), value


def test_build_input_and_errors() -> None:
    got = build_input({"charge_id": "charge.id", "currency": "input.currency",
                       "nothing": "charge.nope"}, DOC)
    assert got == {"charge_id": "ch_1", "currency": "EUR", "nothing": None}
    with pytest.raises(InvalidInput) as info:
        evaluate_when("length(input.weekday)", DOC)
    assert info.value.field == "when" and "length" in str(info.value)
    with pytest.raises(InvalidInput):
        build_input({"k": "a.["}, DOC)


def test_document_keeps_input_over_an_upstream_named_input() -> None:
    assert document(1, {"input": 2, "a": 3}) == {"input": 1, "a": 3}


def test_compiled_expressions_are_cached() -> None:
    assert compile_expression("input.a") is compile_expression("input.a")
    assert expression_problem("input.a", {"input"}) is None


# -- skip propagation ----------------------------------------------------------------------

C, S, F, P = Outcome.COMPLETED, Outcome.SKIPPED, Outcome.FAILED, Outcome.PENDING


@pytest.mark.parametrize(("trigger", "ups", "expected"), [
    ("all_completed", [], Decision.RUN),
    ("all_completed", [C, C], Decision.RUN),
    ("all_completed", [C, S], Decision.SKIP),
    ("all_completed", [P, S], Decision.SKIP),
    ("all_completed", [C, P], Decision.WAIT),
    ("all_completed", [C, F], Decision.WAIT),
    ("none_failed", [C, S], Decision.RUN),
    ("none_failed", [S, S], Decision.SKIP),
    ("none_failed", [S, P], Decision.WAIT),
    ("none_failed", [C, F], Decision.WAIT),
    ("none_failed", [C, C], Decision.RUN),
])
def test_decide(trigger: str, ups: list[Outcome], expected: Decision) -> None:
    assert decide(trigger, ups) is expected


@given(st.sampled_from(list(Trigger)), st.lists(st.sampled_from(list(Outcome)), max_size=6),
       st.data())
def test_decisions_other_than_wait_are_final(trigger: Trigger, ups: list[Outcome],
                                             data: st.DataObject) -> None:
    """Resolving pending upstreams never changes a RUN or SKIP (redelivery decides alike)."""
    first = decide(trigger, ups)
    later = [data.draw(st.sampled_from([C, S, F])) if o is P else o for o in ups]
    if first is not Decision.WAIT:
        assert decide(trigger, later) is first
    if P not in ups and F not in ups:
        assert decide(trigger, ups) is not Decision.WAIT


def test_decide_refuses_an_unknown_trigger() -> None:
    with pytest.raises(InvalidInput) as info:
        decide("sometimes", [C])
    assert info.value.field == "trigger"


def test_run_completes() -> None:
    assert run_completes([C, S, C])
    assert run_completes([S, S])
    assert not run_completes([C, P])
    assert not run_completes([C, F])
    assert not run_completes([])


# -- priority and aging --------------------------------------------------------------------

def test_priority_check() -> None:
    assert check_priority(0) == 0 and check_priority(9) == 9
    for bad in (-1, 10, 2.0, True, "1", None):
        with pytest.raises(InvalidInput):
            check_priority(bad)


def test_lower_first_then_oldest() -> None:
    now = 1000.0
    waiting = [(5, 990.0), (1, 995.0), (5, 980.0), (0, 999.0)]
    served = sorted(waiting, key=lambda w: order_key(w[0], w[1], now))
    assert served == [(0, 999.0), (1, 995.0), (5, 980.0), (5, 990.0)]
    # Past one aging period the old item of priority 1 counts as 0, and is older.
    assert order_key(1, 0.0, now) < order_key(0, 999.0, now)


def test_aging_improves_one_level_per_period() -> None:
    assert effective_priority(9, 0.0, AGING_SECONDS - 1) == 9
    assert effective_priority(9, 0.0, AGING_SECONDS) == 8
    assert effective_priority(9, 0.0, 100 * AGING_SECONDS) == 0
    assert effective_priority(3, 50.0, 0.0) == 3  # a clock behind counts as no wait


@given(st.integers(0, 9), st.integers(0, 9), st.floats(0, 1e6), st.floats(0, 1e6))
def test_sort_key_is_the_continuous_aging_rule(p: int, q: int, t: float, s: float) -> None:
    a, b = sort_key(p, t), sort_key(q, s)
    # No starvation: an item is served before anything enqueued p*AGING later.
    if s > t + p * AGING_SECONDS:
        assert a < b
    # Strict priority while waits are shorter than one aging period.
    if p < q and abs(t - s) < AGING_SECONDS:
        assert a < b
    # The stored text sorts like the number.
    assert (sort_key_text(p, t) < sort_key_text(q, s)) == (round(a, 6) < round(b, 6))
