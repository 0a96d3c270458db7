"""The pure rules behind issue 31's pool findings: how long a timed-out holder keeps its
slot, a take at its token's very time, and when a claim must look past its window."""

from __future__ import annotations

from whimbrel.contract.pools import Bucket, held_after_time_out, take, wait_seconds
from whimbrel.contract.priority import order_text
from whimbrel.contract.records import ActivityRecord
from whimbrel.engine.claims import behind_default

T0 = 1_795_800_000.0


def kept(**kw: float | bool | None) -> float | None:
    args: dict[str, float | bool | None] = dict(
        late=False, now=T0 + 20, heartbeat_epoch=None, heartbeat_timeout=None,
        started_epoch=T0, close_epoch=T0 + 10)
    args.update(kw)
    return held_after_time_out(**args)  # type: ignore[arg-type]


def test_a_timed_out_holder_keeps_its_slot_while_it_may_run() -> None:
    # No heartbeat: as long again as start_to_close past the close.
    assert kept(now=T0 + 15) == T0 + 20
    assert kept(now=T0 + 20) is None
    # A late report: the code stopped, the slot goes now.
    assert kept(now=T0 + 15, late=True) is None
    # A heartbeat: one heartbeat timeout after the last beat.
    assert kept(heartbeat_timeout=30, heartbeat_epoch=T0 + 25, now=T0 + 50) == T0 + 55
    assert kept(heartbeat_timeout=30, heartbeat_epoch=T0 + 25, now=T0 + 55) is None
    assert kept(heartbeat_timeout=30, heartbeat_epoch=None, now=T0 + 29) == T0 + 30
    # Neither a heartbeat nor a close deadline: nothing to wait for.
    assert kept(close_epoch=None, now=T0 + 1) is None


def test_a_take_at_its_tokens_very_time_gets_it() -> None:
    # 10 tokens a second, empty at T0: at T0 + 0.1 (an epoch float, 2.4e-7 s apart)
    # the bucket computes 0.99999762 tokens: that is the token.
    empty = Bucket(0.0, T0)
    now = T0 + 0.05
    now += 0.05
    ok, after = take(empty, now, 10.0, 10.0)
    assert ok and after.tokens == 0.0
    assert wait_seconds(empty, now, 10.0, 10.0) == 0.0
    ok, _ = take(empty, T0 + 0.09, 10.0, 10.0)
    assert not ok  # a tenth of a token short is short


def claim_hit(priority: int, since: float) -> ActivityRecord:
    return ActivityRecord("wx", "wx:a:1", "a", "w", 1, None,
                          claim_key=f"w/a/{order_text(priority, since)}/wx:a:1")


def test_a_claim_looks_past_its_window_only_for_what_default_work_beats() -> None:
    now = T0 + 100
    assert behind_default(claim_hit(9, now - 60), now)  # a fresh 9: any 5 goes first
    assert behind_default(claim_hit(6, now), now)
    assert not behind_default(claim_hit(5, now), now)
    assert not behind_default(claim_hit(0, now), now)
    assert not behind_default(claim_hit(9, now - 1300), now)  # aged past a fresh 5
    legacy = ActivityRecord("wx", "wx:a:1", "a", "w", 1, None, claim_key="w/a/wx:a:1")
    assert not behind_default(legacy, now)
