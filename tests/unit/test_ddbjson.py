"""The one DynamoDB-JSON codec (whimbrel/contract/ddbjson.py): round trips, and strict
reading of what a raw client may have written."""

from __future__ import annotations

from typing import Any

import pytest

from whimbrel.contract.ddbjson import from_ddb, to_ddb


@pytest.mark.parametrize("value", [
    None, True, False, "", "text", 0, -7, 2**53 + 1, 1.5, -0.25,
    {"a": [1, "b", {"c": None}], "d": {}}, [], [[[]]], b"\x00\xff",
])
def test_round_trip(value: Any) -> None:
    assert from_ddb(to_ddb(value)) == value


@pytest.mark.parametrize(("av", "plain"), [
    ({"N": "42"}, 42), ({"N": "4.0"}, 4), ({"N": "1e2"}, 100), ({"N": "-0.5"}, -0.5),
    ({"SS": ["b", "a"]}, ["a", "b"]), ({"NS": ["2", "1.5"]}, [1.5, 2]),
    ({"B": "AAE="}, b"\x00\x01"), ({"M": {"rows": {"N": "42"}}}, {"rows": 42}),
])
def test_reading(av: dict[str, Any], plain: Any) -> None:
    assert from_ddb(av) == plain


@pytest.mark.parametrize(("av", "words"), [
    ({"Z": "x"}, "unknown DynamoDB type 'Z'"),
    ({"S": "a", "N": "1"}, "exactly one type tag"),
    ({"N": "Infinity"}, "not finite"),
    ({"N": "NaN"}, "not finite"),
    ({"N": "1e400"}, "beyond what DynamoDB can store"),
    ({"N": "1" * 39}, "beyond what DynamoDB can store"),
    ({"N": "seven"}, "not a number"),
    ({"S": 7}, "S holds text"),
    ({"BOOL": "true"}, "BOOL holds true or false"),
    ({"M": []}, "M holds a map"),
    ({"B": "not base64!"}, "B holds base64"),
])
def test_strict_reading(av: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        from_ddb(av)


def test_what_cannot_be_stored() -> None:
    with pytest.raises(TypeError, match="cannot store set"):
        to_ddb({1, 2})
