"""One duration formatter, two styles (issue 21): the CLI's compact one and the
console's spaced one, pinned side by side, and the two call sites share it."""

from __future__ import annotations

import pytest

from whimbrel.cli.shapes import human_duration
from whimbrel.contract.durations import duration
from whimbrel.ui.present import span

CASES = [  # seconds, compact (CLI), spaced (console)
    (None, "", ""),
    (0.0, "0ms", "0 ms"),
    (0.25, "250ms", "250 ms"),
    (12.34, "12.3s", "12.3 s"),
    (59.94, "59.9s", "59.9 s"),
    (245, "4m05s", "4 min 05 s"),
    (3599, "59m59s", "59 min 59 s"),
    (7380, "2h03m", "2 h 03 min"),
    (47 * 3600 + 59 * 60, "47h59m", "47 h 59 min"),
    (200_000, "55h33m", "2 d 07 h"),  # only the console turns to days
    (10 * 86400 + 3600, "241h00m", "10 d 01 h"),
]


@pytest.mark.parametrize(("seconds", "compact", "spaced"), CASES)
def test_both_styles(seconds: float | None, compact: str, spaced: str) -> None:
    assert duration(seconds) == duration(seconds, "compact") == compact
    assert duration(seconds, "spaced") == spaced


@pytest.mark.parametrize(("seconds", "compact", "spaced"), CASES)
def test_cli_and_console_use_it(seconds: float | None, compact: str, spaced: str) -> None:
    assert human_duration(seconds) == compact
    assert span(seconds) == spaced
