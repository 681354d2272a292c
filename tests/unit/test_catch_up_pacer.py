"""The pending projection's catch-up pacer: a steady stream of nudges is caught up in
batches at most `linger_seconds` apart, a nudge after a quiet spell at once."""

from __future__ import annotations

import pytest
from workflow_runner.engine import CatchUpPacer


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _pacer(linger: float, clock: FakeTime) -> CatchUpPacer:
    return CatchUpPacer(linger, monotonic=clock.monotonic, sleep=clock.sleep)


def test_the_first_catch_up_starts_at_once() -> None:
    clock = FakeTime()
    assert _pacer(0.05, clock).wait() == 0.0
    assert clock.slept == []


def test_a_catch_up_right_after_another_waits_out_the_rest_of_the_linger() -> None:
    clock = FakeTime()
    pacer = _pacer(0.05, clock)
    pacer.wait()
    clock.now += 0.02  # the first catch-up took 20 ms
    assert pacer.wait() == pytest.approx(0.03)
    assert clock.now == pytest.approx(100.05)
    clock.now += 0.01
    assert pacer.wait() == pytest.approx(0.04)  # spaced from when the last one started
    assert clock.now == pytest.approx(100.1)


def test_a_catch_up_after_a_quiet_spell_or_a_long_catch_up_starts_at_once() -> None:
    clock = FakeTime()
    pacer = _pacer(0.5, clock)  # binary fractions: the sums below are exact
    pacer.wait()
    clock.now += 2.0
    assert pacer.wait() == 0.0
    clock.now += 0.5  # exactly the linger later
    assert pacer.wait() == 0.0
    assert clock.slept == []


def test_no_linger_never_waits() -> None:
    clock = FakeTime()
    pacer = _pacer(0.0, clock)
    for _ in range(3):
        assert pacer.wait() == 0.0
    assert clock.slept == []
