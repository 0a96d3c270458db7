"""Cycles of child workflows, found without a database (contract/nesting.py)."""

from __future__ import annotations

from whimbrel import ActivityDefinition, LauncherSpec, WorkflowDefinition
from whimbrel.contract.limits import MAX_NESTING_DEPTH
from whimbrel.contract.nesting import child_cycle, child_workflows, describe_cycle


def test_the_children_a_definition_starts_each_once_with_their_pins() -> None:
    defn = WorkflowDefinition("top", (
        ActivityDefinition("a", launcher=LauncherSpec.workflow("kid")),
        ActivityDefinition("b", launcher=LauncherSpec.workflow("kid")),
        ActivityDefinition("c", launcher=LauncherSpec.workflow("old", version=2)),
        ActivityDefinition("d"),
    ))
    assert child_workflows(defn) == (("kid", None), ("old", 2))


def test_a_self_child_and_a_two_step_cycle_are_found() -> None:
    assert child_cycle("A", {("A", None): (("A", None),)}) == ("A", "A")
    # B is being registered; the registered A starts B.
    graph = {("B", None): (("A", None),), ("A", None): (("B", None),)}
    assert child_cycle("B", graph) == ("B", "A", "B")
    assert describe_cycle(("B", "A", "B")) == "A → B → A"
    assert describe_cycle(("A", "B", "A")) == "A → B → A"


def test_the_shortest_cycle_is_named() -> None:
    graph = {("R", None): (("X", None), ("Y", None)),
             ("X", None): (("Z", None),), ("Z", None): (("R", None),),
             ("Y", None): (("R", None),)}
    assert child_cycle("R", graph) == ("R", "Y", "R")


def test_no_cycle_in_a_chain_or_a_diamond() -> None:
    graph = {("R", None): (("X", None), ("Y", None)),
             ("X", None): (("Z", None),), ("Y", None): (("Z", None),), ("Z", None): ()}
    assert child_cycle("R", graph) is None
    # A cycle below root that does not pass through root is not root's to refuse.
    below = {("R", None): (("X", None),), ("X", None): (("Y", None),),
             ("Y", None): (("X", None),)}
    assert child_cycle("R", below) is None


def test_a_pinned_older_version_of_root_is_its_own_node() -> None:
    # Root's new version starts X; X pins root's version 1, which starts nothing.
    graph = {("R", None): (("X", None),), ("X", None): (("R", 1),), ("R", 1): ()}
    assert child_cycle("R", graph) is None
    # A pin on a version not registered yet (the one being registered) is root itself.
    graph = {("R", None): (("X", None),), ("X", None): (("R", 2),)}
    assert child_cycle("R", graph) == ("R", "X", "R")


def test_the_nesting_limit_is_ten() -> None:
    assert MAX_NESTING_DEPTH == 10
