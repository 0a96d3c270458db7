"""Issue 22's pure layer: flow-control fields of definitions, conditions and inputs from
data, skip propagation, priority with aging, schedules and pools. No I/O, no clock."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from whimbrel.contract import checks
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
from whimbrel.contract.ids import workflow_exec_id_for
from whimbrel.contract.pools import (
    MAX_PROBES,
    Bucket,
    Pool,
    probe_order,
    rate_shard_key,
    rate_shards,
    refill,
    run_pool,
    shard_choice,
    shard_limits,
    slot_key,
    take,
    wait_seconds,
)
from whimbrel.contract.priority import (
    AGING_SECONDS,
    check_priority,
    effective_priority,
    order_key,
    sort_key,
    sort_key_text,
)
from whimbrel.contract.schedules import (
    DEFAULT_CATCHUP_SECONDS,
    MAX_DUE_FIRES,
    Overlap,
    OverlapAction,
    Schedule,
    backfill_fires,
    due_fires,
    fire_request_id,
    next_fire,
    overlap_action,
    parse_fire_request_id,
)


@pytest.fixture
def flow_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(defs_module, "FLOW_FIELDS_ENABLED", defs_module.FLOW_FIELDS)


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

def test_switch_refuses_every_flow_field_not_enabled_naming_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The switch stays for a field whose wiring is not there yet: refused, named.
    monkeypatch.setattr(defs_module, "FLOW_FIELDS_ENABLED",
                        frozenset({"when", "trigger", "input_from"}))
    problems = _problems(BRANCHES)
    assert len(problems) == 1
    text = problems[0]
    assert text.startswith("not supported yet")
    for part in ("max_running", "'refund': pool", "'refund': priority"):
        assert part in text
    for part in ("'refund': when", "'refund': input_from", "'notify': trigger"):
        assert part not in text


def test_every_flow_field_is_wired_and_accepted() -> None:
    # Conditions and inputs from data (engine/conditions.py), pools, max_running and
    # priority (engine/pools.py): all enforced, so all accepted.
    assert defs_module.FLOW_FIELDS_ENABLED == defs_module.FLOW_FIELDS
    defn = WorkflowDefinition.from_dict(BRANCHES)
    assert defn.activity("notify").trigger == "none_failed"
    assert (defn.max_running, defn.activity("refund").pool,
            defn.activity("refund").priority) == (3, "payments", 2)


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
    ({"when": ["charge"]}, "when must be a non-empty JMESPath expression, not ['charge']"),
    ({"when": {"a": 1}}, "when must be a non-empty JMESPath expression"),
    ({"input_from": {"k": ["x"]}}, "input_from['k'] must be a non-empty JMESPath"),
    ({"when": "nope(charge)"}, "unknown function nope()"),
    ({"when": "length(charge, charge)"}, "length() takes 1 argument(s), not 2"),
    ({"when": "other.x"}, "reads other, which is neither 'input' nor an activity"),
    ({"when": "charge.status == `declined`"}, "deprecated `text` literal"),
    ({"input_from": {"k": "a ~ b"}}, "input_from['k'] is not valid JMESPath at position 2"),
    ({"input_from": {"k": "missing"}}, "input_from['k'] reads missing"),
    ({"input_from": {"": "input"}}, "input_from key '' must be non-empty"),
    ({"input_from": ["input"]}, "input_from must be a mapping"),
    ({"pool": "p", "launcher": {"type": "timer", "seconds": 60}}, "timer wait launches nothing"),
    ({"map_over": "charge", "input_from": {"k": "input"}},
     "input_from is not supported on a map"),
])
@pytest.mark.filterwarnings("ignore:deprecated string literal")
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


@pytest.mark.filterwarnings("ignore:deprecated string literal")
@settings(max_examples=300)
@given(st.one_of(st.text(max_size=40),
                 st.text(alphabet="ab input.[]?*@&|!`'\"{}:,()=<>-0123456789_$ ", max_size=40)))
def test_expression_checks_never_crash(text: str) -> None:
    """Any text gets a verdict (a problem or None), never an exception."""
    for known in (None, {"input", "a", "b"}):
        verdict = expression_problem(text, known)
        assert verdict is None or (isinstance(verdict, str) and verdict)
        if verdict is None:  # it evaluates, or fails inside the error tree
            try:
                evaluate_when(text, {"input": {"a": [1, {"b": 2}]}, "a": None})
            except InvalidInput as exc:
                assert exc.field == "when"


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_flow_fields_round_trip(data: st.DataObject) -> None:
    monkey = pytest.MonkeyPatch()
    monkey.setattr(defs_module, "FLOW_FIELDS_ENABLED", defs_module.FLOW_FIELDS)
    try:
        acts = [{"name": "a", "launcher": "external",
                 "priority": data.draw(st.integers(0, 9)),
                 "pool": data.draw(st.one_of(st.none(), st.from_regex(
                     r"\A[A-Za-z][A-Za-z0-9_-]{0,10}\Z")))},
                {"name": "b", "launcher": "external", "depends_on": ["a"],
                 "trigger": data.draw(st.sampled_from(["all_completed", "none_failed"])),
                 "when": data.draw(st.sampled_from([None, "a", "input.x == `1`", "!a.y"])),
                 "input_from": data.draw(st.dictionaries(
                     st.text(min_size=1, max_size=5), st.sampled_from(["a.id", "input"]),
                     max_size=3))}]
        top = {"max_running": data.draw(st.one_of(st.none(), st.integers(1, 1000)))}
        defn = WorkflowDefinition.from_dict(_wf(*acts, **top))
        assert WorkflowDefinition.from_json(defn.to_json()) == defn
        assert defn.max_running == top["max_running"]
        assert defn.activity("b").input_from == acts[1]["input_from"]
    finally:
        monkey.undo()


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


# -- schedules -----------------------------------------------------------------------------

def _t(text: str) -> float:
    """An ISO time with its offset as epoch seconds."""
    return datetime.fromisoformat(text).timestamp()


def _utc(fires: list[float]) -> list[str]:
    return [datetime.fromtimestamp(f, UTC).strftime("%m-%dT%H:%MZ") for f in fires]


@pytest.mark.parametrize(("kw", "needle"), [
    ({"cron": "0 0 30 2 *"}, "never fires: no month it names has a day '30'"),
    ({"cron": "0 0 31 4,6,9,11 *"}, "never fires"),
    ({"cron": "61 * * * *"}, "not a valid cron string: Bad minute"),
    ({"cron": "0 2 * *"}, "must have 5 fields"),
    ({"cron": "0 0 2 * * *"}, "must have 5 fields"),
    ({"cron": "0 2 * * *", "timezone": "Mars/Olympus"}, "'Mars/Olympus' is not a known IANA"),
    ({"cron": "0 2 * * *", "timezone": ""}, "is not a known IANA"),
    ({"cron": "0 2 * * *", "timezone": "America"}, "is not a known IANA"),
    ({"cron": "0 2 * * *", "timezone": "x" * 3000}, "is not a known IANA"),
    ({"cron": "0 2 * * *", "timezone": "UTC\x00"}, "is not a known IANA"),
    ({"cron": "0 2 * * *", "timezone": ["UTC"]}, "is not a known IANA"),
    ({"cron": ["0 2 * * *"]}, "cron must be a string"),
    ({"cron": "0 2 * * " + "1," * 200 + "1"}, "more than 200"),
    ({"every_seconds": 60, "overlap": ["skip"]}, "overlap must be one of"),
    ({}, "exactly one of cron and every_seconds"),
    ({"cron": "@daily", "every_seconds": 60}, "exactly one of cron and every_seconds"),
    ({"every_seconds": 0}, "every_seconds must be a whole number"),
    ({"every_seconds": 1.5}, "every_seconds must be a whole number"),
    ({"every_seconds": 60, "overlap": "queue"}, "overlap must be one of skip, buffer_one"),
    ({"every_seconds": 60, "catchup_seconds": 10}, "catchup_seconds must be a number"),
    ({"every_seconds": 60, "input": {"x": {1, 2}}}, "input is not JSON"),
    ({"every_seconds": 60, "start_at": 200, "end_at": 100}, "end_at is before start_at"),
    ({"cron": "0 0 * * *", "start_at": 100, "end_at": 200}, "never fires before end_at"),
    ({"every_seconds": 60, "start_at": "soon"}, "start_at must be epoch seconds"),
])
def test_schedule_validation(kw: dict[str, Any], needle: str) -> None:
    with pytest.raises(InvalidInput) as info:
        Schedule("nightly", "wf", **kw).validate()
    assert needle in str(info.value), str(info.value)
    assert needle in " ".join(info.value.fields["problems"])


def test_schedule_ids_are_names() -> None:
    for bad in ("a@b", "", "9lives", "a b", "x" * 65):
        assert any("schedule_id must match" in p
                   for p in Schedule(bad, "wf", every_seconds=60).problems())
    assert any("workflow_name must match" in p
               for p in Schedule("s", "bad name", every_seconds=60).problems())


def test_schedule_round_trip_and_defaults() -> None:
    s = Schedule.from_dict({"schedule_id": "nightly", "workflow_name": "etl",
                            "cron": "0  2 * * *", "timezone": "Europe/Berlin",
                            "overlap": "buffer_one", "input": {"full": True}})
    assert s.cron == "0 2 * * *" and s.catchup_seconds == DEFAULT_CATCHUP_SECONDS
    assert s.to_dict() == {"schedule_id": "nightly", "workflow_name": "etl",
                           "cron": "0 2 * * *", "timezone": "Europe/Berlin",
                           "overlap": "buffer_one", "input": {"full": True}}
    assert Schedule.from_dict(s.to_dict()) == s
    aware = Schedule("s", "wf", every_seconds=60,
                     start_at=datetime(2026, 1, 1, tzinfo=UTC))  # type: ignore[arg-type]
    assert aware.start_at == _t("2026-01-01T00:00:00+00:00")
    with pytest.raises(InvalidInput, match="unknown field"):
        Schedule.from_dict({"schedule_id": "s", "workflow_name": "wf", "every": 5})
    with pytest.raises(InvalidInput, match="missing workflow_name"):
        Schedule.from_dict({"schedule_id": "s", "every_seconds": 5})


def test_every_seconds_is_anchored() -> None:
    hourly = Schedule("h", "wf", every_seconds=3600)
    assert next_fire(hourly, _t("2026-11-25T10:28:00+00:00")) == _t("2026-11-25T11:00:00+00:00")
    assert next_fire(hourly, _t("2026-11-25T11:00:00+00:00")) == _t("2026-11-25T12:00:00+00:00")
    start = _t("2026-11-25T10:28:00.5+00:00")
    anchored = Schedule("h", "wf", every_seconds=600, start_at=start, end_at=start + 1200)
    assert next_fire(anchored, 0) == math.ceil(start)
    assert next_fire(anchored, math.ceil(start)) == math.ceil(start) + 600
    assert next_fire(anchored, math.ceil(start) + 600) is None  # past end_at


def test_cron_in_a_zone_follows_its_offset() -> None:
    ny = Schedule("ny", "wf", cron="0 9 * * *", timezone="America/New_York")
    assert _utc([next_fire(ny, _t("2026-07-01T00:00:00+00:00")) or 0]) == ["07-01T13:00Z"]
    assert _utc([next_fire(ny, _t("2026-12-01T00:00:00+00:00")) or 0]) == ["12-01T14:00Z"]


@pytest.mark.parametrize(("zone", "cron", "start", "end", "expected"), [
    # Europe/Berlin springs forward on 2026-03-29 at 02:00 (to 03:00 CEST): a fixed-time
    # job in the gap runs at 03:00, once.
    ("Europe/Berlin", "30 2 * * *", "2026-03-28T00:00:00+01:00", "2026-03-31T00:00:00+02:00",
     ["03-28T01:30Z", "03-29T01:00Z", "03-30T00:30Z"]),
    # ... and falls back on 2026-10-25 at 03:00 (to 02:00 CET): 02:30 happens twice, the
    # job runs the first time only.
    ("Europe/Berlin", "30 2 * * *", "2026-10-24T00:00:00+02:00", "2026-10-27T00:00:00+01:00",
     ["10-24T00:30Z", "10-25T00:30Z", "10-26T01:30Z"]),
    # An hourly job runs every real hour: 5 on the short night, 6 on the long one.
    ("Europe/Berlin", "0 * * * *", "2026-03-29T00:00:00+01:00", "2026-03-29T04:00:00+02:00",
     ["03-28T23:00Z", "03-29T00:00Z", "03-29T01:00Z", "03-29T02:00Z"]),
    ("Europe/Berlin", "0 * * * *", "2026-10-25T00:00:00+02:00", "2026-10-25T04:00:00+01:00",
     ["10-24T22:00Z", "10-24T23:00Z", "10-25T00:00Z", "10-25T01:00Z", "10-25T02:00Z",
      "10-25T03:00Z"]),
    # America/New_York springs forward on 2026-03-08 at 02:00 and falls back on
    # 2026-11-01 at 02:00 (01:00-02:00 happens twice).
    ("America/New_York", "0 2 * * *", "2026-03-07T00:00:00-05:00", "2026-03-10T00:00:00-04:00",
     ["03-07T07:00Z", "03-08T07:00Z", "03-09T06:00Z"]),
    ("America/New_York", "30 1 * * *", "2026-10-31T00:00:00-04:00", "2026-11-03T00:00:00-05:00",
     ["10-31T05:30Z", "11-01T05:30Z", "11-02T06:30Z"]),
    ("America/New_York", "*/30 1 * * *", "2026-11-01T00:00:00-04:00",
     "2026-11-01T03:00:00-05:00",
     ["11-01T05:00Z", "11-01T05:30Z", "11-01T06:00Z", "11-01T06:30Z"]),
])
def test_dst_days(zone: str, cron: str, start: str, end: str, expected: list[str]) -> None:
    s = Schedule("dst", "wf", cron=cron, timezone=zone).validate()
    fires = backfill_fires(s, _t(start), _t(end))
    assert _utc(fires) == expected
    # Stepping with next_fire and a catch-up window find the same firings.
    stepped, after = [], _t(start) - 1
    while (nxt := next_fire(s, after)) is not None and nxt <= _t(end):
        stepped.append(nxt)
        after = nxt
    assert stepped == fires


def test_next_fire_from_inside_a_repeated_hour_never_goes_back() -> None:
    s = Schedule("b", "wf", cron="30 2 * * *", timezone="Europe/Berlin")
    second_pass = _t("2026-10-25T02:10:00+01:00")  # 01:10Z, after the 02:30 CEST firing
    assert _utc([next_fire(s, second_pass) or 0]) == ["10-26T01:30Z"]


def test_backfill_is_bounded() -> None:
    s = Schedule("m", "wf", cron="* * * * *")
    assert len(backfill_fires(s, 0, 59 * 60)) == 60
    with pytest.raises(InvalidInput, match="more than 10 firings; split the range"):
        backfill_fires(s, 0, 3600, limit=10)
    with pytest.raises(InvalidInput, match="empty"):
        backfill_fires(s, 10, 0)


def test_due_fires_catches_up_and_drops_the_old() -> None:
    s = Schedule("q", "wf", every_seconds=900, catchup_seconds=3600)
    now = _t("2026-11-25T12:07:00+00:00")
    # Down since 08:00: only the firings of the last hour start.
    got = due_fires(s, _t("2026-11-25T08:00:00+00:00"), now)
    assert _utc(got) == ["11-25T11:15Z", "11-25T11:30Z", "11-25T11:45Z", "11-25T12:00Z"]
    assert due_fires(s, got[-1], now) == []
    assert due_fires(s, got[1], now) == got[2:]
    assert len(due_fires(Schedule("f", "wf", every_seconds=1), None, now)) == MAX_DUE_FIRES


SCHEDULES = st.one_of(
    st.builds(lambda e, c: Schedule("p", "wf", every_seconds=e, catchup_seconds=c),
              st.integers(1, 7200), st.floats(60, 20000)),
    st.builds(lambda cron, z, c: Schedule("p", "wf", cron=cron, timezone=z, catchup_seconds=c),
              st.sampled_from(["* * * * *", "*/7 * * * *", "30 2 * * *", "0 * * * *",
                               "15 1,2,3 * * 0"]),
              st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]),
              st.floats(60, 20000)))
# Around the 2026 switches of both zones, and anywhere in between.
NOWS = st.one_of(st.floats(_t("2026-03-07T00:00:00+00:00"), _t("2026-03-31T00:00:00+00:00")),
                 st.floats(_t("2026-10-24T00:00:00+00:00"), _t("2026-11-03T00:00:00+00:00")))


@settings(max_examples=60, deadline=None)
@given(SCHEDULES, NOWS, st.one_of(st.none(), st.floats(0, 30000)))
def test_due_fires_properties(s: Schedule, now: float, back: float | None) -> None:
    last = None if back is None else now - back
    got = due_fires(s, last, now)
    assert got == sorted(set(got))
    assert len(got) <= MAX_DUE_FIRES
    assert all(now - s.catchup_seconds <= f <= now for f in got)
    assert all(f == int(f) for f in got)
    if last is not None:
        assert all(f > last for f in got)
    if len(got) < MAX_DUE_FIRES:  # nothing due was left out
        lower = max(now - s.catchup_seconds, last if last is not None else -math.inf)
        every = [f for f in backfill_fires(s, math.floor(lower), now, limit=100_000)
                 if f >= now - s.catchup_seconds and (last is None or f > last)]
        assert got == every


def test_fire_request_ids_pass_the_id_rules() -> None:
    fire = _t("2026-11-25T02:00:00+00:00")
    rid = fire_request_id("nightly", fire)
    assert rid == "nightly@2026-11-25T02:00:00Z"
    assert checks.text(rid, "workflow_request_id") == rid
    assert workflow_exec_id_for(rid) == workflow_exec_id_for("nightly@2026-11-25T02:00:00Z")
    assert workflow_exec_id_for(rid) != workflow_exec_id_for(fire_request_id("nightly",
                                                                              fire + 60))
    assert parse_fire_request_id(rid) == ("nightly", fire)
    for other in ("nightly", "a@b@c", "nightly@2026-11-25", "9x@2026-11-25T02:00:00Z"):
        assert parse_fire_request_id(other) is None


@pytest.mark.parametrize(("policy", "live", "buffered", "expected"), [
    ("skip", False, False, OverlapAction.START),
    ("skip", True, False, OverlapAction.SKIP),
    ("buffer_one", False, False, OverlapAction.START),
    ("buffer_one", True, False, OverlapAction.BUFFER),
    ("buffer_one", True, True, OverlapAction.SKIP),
    ("allow", True, True, OverlapAction.START),
])
def test_overlap(policy: str, live: bool, buffered: bool, expected: OverlapAction) -> None:
    assert overlap_action(policy, live, buffered) is expected
    assert Overlap(policy).value == policy


def test_overlap_refuses_unknown() -> None:
    with pytest.raises(InvalidInput) as info:
        overlap_action("sometimes", True)
    assert info.value.field == "overlap"


# -- pools -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("kw", "needle"), [
    ({"slots": -1}, "slots must be a whole number from 0"),
    ({"slots": 2.5}, "slots must be a whole number"),
    ({"slots": True}, "slots must be a whole number"),
    ({"per_second": -0.5}, "per_second must be a number above 0"),
    ({"per_second": 0}, "per_second must be a number above 0"),
    ({"per_second": math.inf}, "per_second must be a number above 0"),
    ({"per_second": math.nan}, "per_second must be a number above 0"),
])
def test_pool_validation(kw: dict[str, Any], needle: str) -> None:
    with pytest.raises(InvalidInput) as info:
        Pool("api", **kw).validate()
    assert needle in str(info.value)
    assert info.value.field in ("slots", "per_second")


def test_pool_names_and_limits() -> None:
    with pytest.raises(InvalidInput) as info:
        Pool("a#b", slots=1).validate()
    assert info.value.field == "name"
    assert Pool("api").validate().unlimited
    assert not Pool("api", slots=0).unlimited  # closed, not unlimited
    assert Pool("api", slots=10, per_second=2.5).validate().per_second == 2.5
    assert slot_key("api", 3) == "pool#api#3" and rate_shard_key("api", 0) == "pool#api#rate#0"
    assert run_pool("etl.daily") == "run:etl.daily"
    assert Pool(run_pool("etl")).problems()  # a user cannot name a pool so


@given(st.integers(0, 50), st.text(max_size=20), st.integers(0, 8))
def test_probe_order(slots: int, seed: str, probes: int) -> None:
    order = probe_order(slots, seed, probes)
    assert len(order) == min(slots, probes)
    assert len(set(order)) == len(order)
    assert all(0 <= k < slots for k in order)
    assert order == probe_order(slots, seed, probes)  # a replay probes the same slots


def test_probe_order_spreads_load() -> None:
    firsts = [probe_order(10, f"wx:act:{i}")[0] for i in range(2000)]
    counts = [firsts.count(k) for k in range(10)]
    assert min(counts) > 120 and max(counts) < 280  # 200 each when even
    assert len(probe_order(100_000, "x")) == MAX_PROBES


def test_rate_shards_and_choice() -> None:
    assert rate_shards(0.1) == 1 and rate_shards(100) == 1 and rate_shards(101) == 2
    assert rate_shards(100_000) == 1000
    rate, cap = shard_limits(250)
    assert rate == pytest.approx(250 / 3) and cap == rate
    assert shard_limits(0.2) == (0.2, 1.0)  # at least one token fits
    for seed in ("a", "b", "c"):
        first = shard_choice(5, seed)
        assert 0 <= first < 5
        assert shard_choice(5, seed, 1) != first
        assert shard_choice(1, seed, 1) == 0


def test_token_bucket() -> None:
    rate, cap = 2.0, 2.0
    ok, b = take(Bucket(0.0, 100.0), 100.0, rate, cap)
    assert not ok and wait_seconds(b, 100.0, rate, cap) == pytest.approx(0.5)
    ok, b = take(b, 100.5, rate, cap)
    assert ok and b == Bucket(0.0, 100.5)
    full = refill(b, 1000.0, rate, cap)
    assert full == Bucket(2.0, 1000.0)  # capped at the capacity
    assert refill(full, 900.0, rate, cap) == full  # a clock behind adds nothing
    assert wait_seconds(full, 1000.0, rate, cap, n=3) == math.inf


@settings(max_examples=100)
@given(st.floats(0.01, 500), st.lists(st.floats(0, 5), min_size=1, max_size=200))
def test_bucket_never_admits_more_than_rate_and_burst(per_second: float,
                                                      gaps: list[float]) -> None:
    """Over any run of takes, admitted <= capacity + rate * elapsed (per shard)."""
    rate, cap = shard_limits(per_second)
    b, now, admitted = Bucket(cap, 0.0), 0.0, 0
    for gap in gaps:
        now += gap
        ok, b = take(b, now, rate, cap)
        admitted += ok
        assert 0.0 <= b.tokens <= cap
        assert admitted <= cap + rate * now + 1e-6


# -- bad input stays inside the error tree -----------------------------------------------------

BAD_VALUES = [["a"], {"x": 1}, 5, 1.5, True, None, "", "x" * 2000, math.nan, math.inf, -1,
              "America", "\x00"]


@pytest.mark.filterwarnings("ignore:deprecated string literal")
@pytest.mark.parametrize("field", ["when", "pool", "priority", "trigger", "input_from",
                                   "max_running"])
def test_bad_definition_values_are_invalid_definitions(flow_on: None, field: str) -> None:
    for bad in BAD_VALUES:
        act = {"name": "b", "depends_on": ["a"], "launcher": "external"}
        top: dict[str, Any] = {}
        (top if field == "max_running" else act)[field] = bad
        try:
            WorkflowDefinition.from_dict(_wf({"name": "a", "launcher": "external"}, act, **top))
        except InvalidDefinition:
            pass


@pytest.mark.parametrize("field", ["schedule_id", "workflow_name", "cron", "every_seconds",
                                   "timezone", "overlap", "catchup_seconds", "start_at",
                                   "end_at", "input"])
def test_bad_schedule_values_are_invalid_input(field: str) -> None:
    for bad in BAD_VALUES:
        kw: dict[str, Any] = {"schedule_id": "s", "workflow_name": "w"}
        if field != "cron":
            kw["every_seconds"] = 60
        kw[field] = bad
        try:
            Schedule(**kw).validate()
        except InvalidInput:
            pass


@pytest.mark.parametrize("field", ["name", "slots", "per_second"])
def test_bad_pool_values_are_invalid_input(field: str) -> None:
    for bad in BAD_VALUES:
        try:
            Pool(**{"name": "p", field: bad}).validate()
        except InvalidInput:
            pass
