"""whimbrel.testing helpers that need no database."""

from __future__ import annotations

import re

import pytest

from whimbrel.testing import fresh_table_prefix, wait_until


class FakeClock:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_wait_until_returns_the_first_truthy_value() -> None:
    clock = FakeClock()
    answers = iter([None, 0, "", {"ready": True}])

    result = wait_until(lambda: next(answers), timeout=1.0, clock=clock, sleep=clock.sleep)

    assert result == {"ready": True}
    assert clock.sleeps == [0.02, 0.02, 0.02]


def test_wait_until_does_not_sleep_when_already_true() -> None:
    clock = FakeClock()

    assert wait_until(lambda: 42, clock=clock, sleep=clock.sleep) == 42
    assert clock.sleeps == []


def test_wait_until_times_out_with_the_message_and_last_value() -> None:
    clock = FakeClock()
    calls: list[float] = []

    def never() -> list[str]:
        calls.append(clock.now)
        return []

    with pytest.raises(AssertionError) as raised:
        wait_until(
            never,
            timeout=0.1,
            interval=0.03,
            message="table never appeared",
            clock=clock,
            sleep=clock.sleep,
        )

    assert str(raised.value) == "table never appeared (gave up after 0.1s; last value: [])"
    # Never sleeps past the deadline, and checks one last time at it.
    assert sum(clock.sleeps) == pytest.approx(0.1)
    assert calls[-1] == pytest.approx(1000.1)


def test_wait_until_builds_a_callable_message_only_on_timeout() -> None:
    clock = FakeClock()
    built: list[bool] = []

    def describe() -> str:
        built.append(True)
        return "state is still PENDING"

    with pytest.raises(AssertionError, match="state is still PENDING"):
        wait_until(lambda: False, timeout=0.05, message=describe, clock=clock, sleep=clock.sleep)
    assert built == [True]

    wait_until(lambda: True, message=describe, clock=clock, sleep=clock.sleep)
    assert built == [True]


def test_wait_until_with_the_real_clock_times_out_promptly() -> None:
    with pytest.raises(AssertionError, match="nothing happened"):
        wait_until(lambda: None, timeout=0.05, interval=0.01, message="nothing happened")


def test_fresh_table_prefix_is_unique_and_well_formed() -> None:
    prefixes = {fresh_table_prefix() for _ in range(100)}

    assert len(prefixes) == 100
    assert all(re.fullmatch(r"t_[0-9a-f]{8}_", p) for p in prefixes)
