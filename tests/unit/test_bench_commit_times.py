"""The pipeline times each resume at its own pass's commit: a batch that holds early
requests commits a pass at each hold's end, not all of them when the batch returns
(which made the timer lateness read up to the batch's last hold)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bench.harness import commit_times

T = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def test_each_pass_is_timed_by_the_next_hold_s_start_or_the_batch_s_end() -> None:
    first, held_1, held_2 = T, T + timedelta(seconds=0.3), T + timedelta(seconds=0.8)
    holds = [(held_1, 100.02), (held_2, 100.33)]  # (instant it ended at, wall time it began)

    times = commit_times([held_2, first, None, held_1], first, holds, ended=100.85)

    assert times == [100.85, 100.02, 100.85, 100.33]


def test_a_hold_that_did_not_wait_still_bounds_the_passes_before_it() -> None:
    times = commit_times([T, None], T, [(None, 100.01)], ended=100.5)

    assert times == [100.01, 100.5]


def test_without_holds_every_pass_committed_when_the_batch_returned() -> None:
    assert commit_times([T, T], T, [], ended=100.2) == [100.2, 100.2]
