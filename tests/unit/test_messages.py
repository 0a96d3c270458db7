"""Messages name a value's type as a person would: ``null``, not "a NoneType" (issue 20)."""

from __future__ import annotations

import pytest

from whimbrel.contract import checks, dataflow
from whimbrel.contract.launching import LauncherSpec


@pytest.mark.parametrize(("value", "said"), [
    (None, "null"), (True, "a bool"), (1, "an int"), (1.5, "a float"), ("x", "a str"),
    ([1], "a list"), ({"a": 1}, "a dict")])
def test_kind_names_a_type_as_a_person_would(value: object, said: str) -> None:
    assert checks.kind(value) == said


def test_map_over_a_null_says_null() -> None:
    source = dataflow.parse_map_over("fetch.rows")
    with pytest.raises(ValueError) as err:
        dataflow.select({"rows": None}, source)
    assert str(err.value) == "map_over fetch.rows is null, not a list"
    assert "NoneType" not in str(err.value)


def test_a_launcher_of_another_type_is_named() -> None:
    with pytest.raises(TypeError) as err:
        LauncherSpec.parse(["python", "m:f"])
    assert str(err.value) == "launcher must be a string or a mapping, not a list"
