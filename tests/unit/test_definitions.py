from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from whimbrel import ActivityDefinition as Act
from whimbrel import InvalidDefinition, LauncherSpec, RetryPolicy, WorkflowDefinition
from whimbrel.contract.limits import MAX_ACTIVITIES

YAML = """
name: etl
description: nightly load
activities:
  - name: extract
    launcher: {type: python, target: "pkg.mod:extract"}
    retry: {max_attempts: 3, initial_interval_seconds: 2}
  - name: transform
    depends_on: [extract]
    heartbeat_timeout_seconds: 30
  - name: load
    depends_on: [transform]
    launcher: {type: command, argv: ["./load.sh", "--fast"]}
"""


def test_yaml_round_trip() -> None:
    defn = WorkflowDefinition.from_yaml(YAML)
    assert defn.names == ("extract", "transform", "load")
    assert defn.activity("extract").launcher == LauncherSpec.python("pkg.mod:extract")
    assert defn.activity("extract").retry.max_attempts == 3
    assert defn.activity("transform").launcher.kind == "external"
    assert defn.roots == ("extract",)
    assert defn.sinks == ("load",)
    again = WorkflowDefinition.from_json(defn.to_json())
    assert again == defn
    assert again.to_json() == defn.to_json()


def test_python_construction_matches_yaml() -> None:
    defn = WorkflowDefinition("etl", (
        Act("extract", launcher=LauncherSpec.python("pkg.mod:extract"),
            retry=RetryPolicy(max_attempts=3, initial_interval_seconds=2)),
        Act("transform", ["extract"], heartbeat_timeout_seconds=30),
        Act("load", ["transform"], launcher=LauncherSpec.command(["./load.sh", "--fast"])),
    ), description="nightly load")
    assert defn.validate().to_json() == WorkflowDefinition.from_yaml(YAML).to_json()


def test_all_problems_reported_at_once() -> None:
    defn = WorkflowDefinition("bad name!", (
        Act("a", ["c"]),
        Act("b", ["a", "ghost"]),
        Act("c", ["b"]),
        Act("a"),
        Act("9lives"),
        Act("d", ["d"], retry=RetryPolicy(max_attempts=0, jitter=2)),
        Act("e", launcher=LauncherSpec("teleport")),
    ))
    with pytest.raises(InvalidDefinition) as info:
        defn.validate()
    problems = info.value.problems
    text = "\n".join(problems)
    assert "workflow name 'bad name!'" in text
    assert "activity 'a': duplicate activity name" in text
    assert "depends on unknown activity 'ghost'" in text
    assert "activity '9lives': name must match" in text
    assert "activity 'd': depends on itself" in text
    assert "retry.max_attempts must be an integer >= 1" in text
    assert "retry.jitter must be between 0 and 1" in text
    assert "unknown launcher type 'teleport'" in text
    assert any(p.startswith("cycle: ") for p in problems)
    assert len(problems) >= 9


def test_cycle_is_named() -> None:
    defn = WorkflowDefinition("w", (Act("a", ["c"]), Act("b", ["a"]), Act("c", ["b"]),
                                    Act("x")))
    with pytest.raises(InvalidDefinition) as info:
        defn.validate()
    cycle = [p for p in info.value.problems if p.startswith("cycle:")]
    assert len(cycle) == 1
    names = cycle[0].removeprefix("cycle: ").split(" -> ")
    assert names[0] == names[-1]
    assert set(names) == {"a", "b", "c"}
    # each arrow points from an upstream to something that depends on it
    for up, down in itertools.pairwise(names):
        assert up in defn.activity(down).depends_on


def test_size_limits() -> None:
    many = WorkflowDefinition("w", tuple(Act(f"a{i}") for i in range(MAX_ACTIVITIES + 1)))
    with pytest.raises(InvalidDefinition, match="more than the limit"):
        many.validate()
    big = WorkflowDefinition("w", (Act("a", input={"blob": "x" * 400_000}),))
    with pytest.raises(InvalidDefinition, match="bytes, more than the limit"):
        big.validate()


@pytest.mark.parametrize(
    "data, needle",
    [
        ({"activities": []}, "workflow name None"),
        ({"name": "w"}, "activities must be a list"),
        ({"name": "w", "activities": [1]}, "activities[0] must be a mapping"),
        ({"name": "w", "activities": [{"name": "a", "colour": "red"}]}, "unknown field(s) colour"),
        ({"name": "w", "activities": [{"name": "a", "retry": 3}]}, "retry must be a mapping"),
        ({"name": "w", "activities": [{"name": "a", "launcher": {"type": "python"}}]},
         "launcher 'python' needs 'target'"),
        ({"name": "w", "activities": [{"name": "a", "launcher": "python:nocolon"}]},
         "not 'module:function'"),
        ({"name": "w", "activities": [{"name": "a", "heartbeat_timeout_seconds": -1}]},
         "heartbeat_timeout_seconds must be a number > 0"),
        ({"name": "w", "extra": 1, "activities": [{"name": "a"}]}, "unknown field(s) extra"),
    ],
)
def test_malformed_data(data: dict[str, object], needle: str) -> None:
    with pytest.raises(InvalidDefinition) as info:
        WorkflowDefinition.from_dict(data)
    assert needle in str(info.value)


def test_bad_text() -> None:
    with pytest.raises(InvalidDefinition, match="not valid JSON"):
        WorkflowDefinition.from_json("{")
    with pytest.raises(InvalidDefinition, match="not valid YAML"):
        WorkflowDefinition.from_yaml("a: [")
    with pytest.raises(InvalidDefinition, match="must be a mapping"):
        WorkflowDefinition.from_yaml("- 1")


def test_retry_delays() -> None:
    policy = RetryPolicy(max_attempts=5, initial_interval_seconds=1, backoff_rate=2,
                         max_interval_seconds=5, jitter=0.5)
    assert [policy.delay_after(n) for n in (1, 2, 3, 4)] == [1, 2, 4, 5]
    assert policy.delay_after(2, 0.5) == pytest.approx(1.5)


@st.composite
def dags(draw: st.DrawFn) -> WorkflowDefinition:
    n = draw(st.integers(1, 12))
    acts = []
    for i in range(n):
        deps = draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else set()
        acts.append(Act(f"a{i}", tuple(f"a{d}" for d in sorted(deps))))
    return WorkflowDefinition("w", tuple(acts))


@settings(max_examples=60, deadline=None)
@given(dags())
def test_random_dags_valid_and_round_trip(defn: WorkflowDefinition) -> None:
    defn.validate()
    order = defn.topological_order()
    pos = {n: i for i, n in enumerate(order)}
    for act in defn.activities:
        assert all(pos[d] < pos[act.name] for d in act.depends_on)
    assert WorkflowDefinition.from_dict(json.loads(defn.to_json())) == defn
