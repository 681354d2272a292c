"""The side-by-side benchmarks' arithmetic: wake-up figures, the peer's best setting
(the ratio's denominator) and the ratios' directions, and the report marking the
setting the ratio was taken against."""

from __future__ import annotations

from typing import Any

import pytest

from bench.peer_figures import (
    WorkerSettings,
    best_setting,
    leaders,
    makespan_ratio,
    quickest,
    send_pace,
    throughput_ratio,
    wake_figures,
)
from bench.report_peers import _finalists_text, event_wait_section, sleep_batched
from bench.run_peers import ABSURD_EVENT_OTHER_SHAPES, absurd_event_shapes


def test_wake_figures_span_from_the_first_send_to_the_last_resume() -> None:
    sent = {"a": 100.0, "b": 100.5, "c": 101.0}
    done = {"a": 100.25, "b": 101.0, "c": 102.0}

    figures = wake_figures(sent, done)

    assert figures["span_s"] == 2.0
    assert figures["runs_per_s"] == 1.5
    assert (figures["p50_ms"], figures["latency_ms"]["max"]) == (500.0, 1000.0)
    assert figures["send_span_ms"] == 1000.0  # the events took a second to hand over


def test_a_resume_without_its_send_is_refused() -> None:
    with pytest.raises(ValueError, match="without a send"):
        wake_figures({"a": 1.0}, {"a": 2.0, "b": 3.0})


def test_the_best_setting_is_the_fastest_and_the_first_of_equals() -> None:
    tried = [
        {"settings": {"processes": 2}, "runs_per_s": 150.0},
        {"settings": {"processes": 4}, "runs_per_s": 180.0},
        {"settings": {"processes": 8}, "runs_per_s": 180.0},
    ]

    assert best_setting(tried)["settings"] == {"processes": 4}
    assert best_setting(tried[:1], key="runs_per_s") is tried[0]
    with pytest.raises(ValueError):
        best_setting([])


def test_ratios_are_above_one_when_ours_is_faster() -> None:
    assert throughput_ratio(1800.0, 200.0) == 9.0  # runs/s: ours over the peer's
    assert makespan_ratio(0.5, 2.0) == 4.0  # seconds: the peer's over ours
    assert throughput_ratio(100.0, 300.0) == 0.33


def _tried(poll: float, rate: float) -> dict[str, object]:
    settings = {"processes": 2, "batch": 100, "poll_s": poll}
    return {"settings": settings, "runs_per_s": rate, "p50_ms": 1.0, "p99_ms": 2.0}


_DBOS = {"runs_per_s": 186.0, "p50_ms": 66.0, "p99_ms": 113.0}


def _event_wait(
    ours: dict[str, Any],
    absurd_tried: list[dict[str, Any]],
    dbos: dict[str, Any] = _DBOS,
    **more: Any,
) -> dict[str, Any]:
    """Workload 14's results as run_peers.run_event_wait writes them: Absurd's best
    shape and both ratios worked out from the figures given (`more`: further keys)."""
    best = best_setting(absurd_tried)
    return {
        "n": 1000,
        "ours": ours,
        "absurd": {"tried": absurd_tried, "best": best},
        "dbos": dbos,
        "ratio_vs_absurd": throughput_ratio(ours["runs_per_s"], best["runs_per_s"]),
        "ratio_vs_dbos": throughput_ratio(ours["runs_per_s"], dbos["runs_per_s"]),
        **more,
    }


def test_the_event_wait_report_marks_the_peer_setting_the_ratio_used() -> None:
    tried = [_tried(0.25, 200.0), _tried(0.05, 300.0)]
    ours = {"runs_per_s": 600.0, "p50_ms": 5.0, "p99_ms": 9.0}
    dbos = {"runs_per_s": 100.0, "p50_ms": 50.0, "p99_ms": 90.0}
    results = _event_wait(ours, tried, dbos)

    lines = event_wait_section(results)

    rows = [line for line in lines if line.startswith("| Absurd")]
    assert rows[0].endswith("|  |") and rows[1].endswith("| **2.0×** |")
    assert any(line.startswith("| DBOS") and "**6.0×**" in line for line in lines)
    assert not any("is faster here" in line for line in lines)


def test_absurds_event_wait_shapes_are_the_sleep_best_at_each_poll_then_other_shapes_once() -> None:
    """The event wait's denominator is Absurd's best over processes and batches too, not
    only over one shape's polls; a shape the sleep sweep already gives is not run twice."""
    shapes = absurd_event_shapes(WorkerSettings(2, 100, 0.05))

    assert shapes[:2] == [WorkerSettings(2, 100, 0.25), WorkerSettings(2, 100, 0.05)]
    assert len(shapes) == len(set(shapes)) == 2 + len(ABSURD_EVENT_OTHER_SHAPES) - 1
    assert {(s.processes, s.batch) for s in shapes} >= {(2, 100), (4, 10), (8, 100)}


def test_the_event_wait_report_names_absurds_lowest_latency_shape_when_it_is_not_the_best() -> None:
    fast = {**_tried(0.05, 760.0), "p50_ms": 159.0, "p99_ms": 541.0}
    quick = {
        "settings": {"processes": 8, "batch": 100, "poll_s": 0.05},
        "runs_per_s": 628.4,
        "p50_ms": 42.3,
        "p99_ms": 123.5,
    }
    ours = {"runs_per_s": 2300.0, "p50_ms": 201.0, "p99_ms": 297.0}
    default = {"runs_per_s": 1650.0, "p50_ms": 326.0, "p99_ms": 597.0}
    results = _event_wait(ours, [fast, quick], ours_tried=[default, ours])

    text = " ".join(event_wait_section(results))

    assert "at 8 processes, batch 100, poll 50 ms its p50 is 42.3 ms" in text
    assert "lower than our lowest p50 at any batch size (201 ms)" in text
    assert "0.83 of its best" in text
    assert "then other processes and batches" in text
    results["absurd"] = {"tried": [fast], "best": fast}
    one_shape = " ".join(event_wait_section(results))
    assert "lowest latency" not in one_shape
    assert "its poll interval was tried at each value below" in one_shape


def test_the_event_wait_report_compares_latency_at_the_same_pace_when_it_was_measured() -> None:
    """Absurd's events are commits sent over about a second, ours handed over at once:
    the report gives both spans and our latency at the pace of Absurd's lowest-latency
    shape, not a comparison with our burst's."""
    fast = {**_tried(0.05, 900.0), "p50_ms": 190.0, "p99_ms": 500.0, "send_span_ms": 975.0}
    quick = {
        "n": 1000,
        "settings": {"processes": 8, "batch": 100, "poll_s": 0.05},
        "runs_per_s": 750.0,
        "p50_ms": 32.3,
        "p99_ms": 101.0,
        "send_span_ms": 1313.6,
    }
    ours = {"runs_per_s": 3000.0, "p50_ms": 230.0, "p99_ms": 340.0, "send_span_ms": 7.3}
    paced = {"p50_ms": 9.5, "p99_ms": 21.25, "pace_per_s": 760.5}
    results = _event_wait(
        ours,
        [fast, quick],
        ours_tried=[{**ours, "send_span_ms": 7.6}, ours],
        ours_paced={**paced, "intake_batch": 10, "resume_batch": 10},
    )

    text = " ".join(event_wait_section(results))

    assert "threads took 975-1,314 ms over the 1,000 across its shapes" in text
    assert "EventWakeup's queue within 7.6 ms" in text
    assert "events arriving across 1,314 ms (its lowest-latency shape's)" in text
    assert "(8 processes, batch 100, poll 50 ms: 760 events/s)" in text
    assert "ours at batches 10/10 (the template's default) had p50 9.5 ms" in text
    assert "and p99 21.25 ms, against that shape's 32.3 and 101 ms." in text
    assert "than our lowest p50 at any batch size" not in text


def test_a_send_pace_is_the_events_over_the_span_of_their_sends() -> None:
    assert send_pace({"n": 1001, "send_span_ms": 2000.0}) == 500.0
    assert send_pace({"n": 1000}) is None  # figures from before the span was recorded
    assert send_pace({"n": 1000, "send_span_ms": 0.0}) is None  # all in one instant
    tried = [{"p50_ms": 5.0, "k": 1}, {"p50_ms": 2.0, "k": 2}, {"p50_ms": 2.0, "k": 3}]
    assert quickest(tried)["k"] == 2


def test_the_report_says_when_the_peer_is_faster() -> None:
    ours = {"runs_per_s": 150.0, "p50_ms": 5.0, "p99_ms": 9.0}
    dbos = {"runs_per_s": 100.0, "p50_ms": 50.0, "p99_ms": 90.0}
    results = _event_wait(ours, [_tried(0.05, 300.0)], dbos)

    text = "\n".join(event_wait_section(results))

    assert "ours is **0.5×** Absurd's throughput (**Absurd is faster here**)" in text
    assert "DBOS is faster" not in text


def test_a_sweeps_leaders_are_its_fastest_shapes_in_order_the_first_of_equals_first() -> None:
    """Absurd's two leading shapes at the sweep's small N both run again at the full N,
    the better there the ratio's denominator: the sweep's order did not hold at 5,000
    (2026-12-04: its leader ran 185.6 runs/s there, the runner-up 314-342)."""
    sweep = [_tried(0.25, 146.0), _tried(0.05, 214.0), _tried(0.1, 207.0), _tried(0.5, 214.0)]

    leading = leaders(sweep, 2)

    assert [t["settings"]["poll_s"] for t in leading] == [0.05, 0.5]
    assert leaders(sweep, 10) == sorted(sweep, key=lambda t: -t["runs_per_s"])
    at_full = [{**leading[0], "runs_per_s": 185.6}, {**leading[1], "runs_per_s": 330.0}]
    assert best_setting(at_full)["runs_per_s"] == 330.0


def test_every_shape_close_to_the_sweeps_leader_runs_again_at_the_full_n() -> None:
    """Beside the best two, a shape within the margin of the sweep's leader runs again:
    on 2026-12-05 the four shapes claiming 10 or 100 came within 5-10% of one another at
    500 tasks in their order of that run, and the one left out (339-363 runs/s at 5,000
    in the two runs before) was Absurd's best, so the ratio was taken against a slower
    shape. A shape further behind does not run again."""
    sweep = [
        _tried(0.25, 182.0),
        _tried(0.05, 249.0),
        _tried(0.1, 237.7),
        _tried(0.5, 248.1),
        _tried(1.0, 242.7),
    ]

    assert [t["settings"]["poll_s"] for t in leaders(sweep, 2)] == [0.05, 0.5]
    close = leaders(sweep, 2, within=0.15)
    assert [t["settings"]["poll_s"] for t in close] == [0.05, 0.5, 1.0, 0.1]
    assert leaders(sweep, 2, within=0.0) == leaders(sweep, 2)
    assert leaders([], 2, within=0.15) == []


def test_the_report_names_the_rule_that_chose_absurds_finalists() -> None:
    """A run's report says which shapes ran again at the full N by that run's own rule:
    results written before the margin existed carry no `finalists_within`."""
    finalists = [_tried(0.05, 300.0), _tried(0.5, 310.0), _tried(1.0, 290.0)]

    now = _finalists_text({"finalists": finalists, "finalists_within": 0.15}, 5000)
    before = _finalists_text({"finalists": finalists[:2]}, 5000)

    assert now.startswith("the 3 of them within 15% of the fastest (at least the best two)")
    assert before.startswith("the best 2 of them ran again at N = 5,000")
    assert "within" not in before


def _sleep_shape(batch: int, runs_per_s: float) -> dict[str, Any]:
    return {
        "n": 5000,
        "intake_batch": batch,
        "resume_batch": batch,
        "runs_per_s": runs_per_s,
        "makespan_s": round(5000 / runs_per_s, 3),
        "latency_s": {"p50": 1.1, "p99": 1.7},
    }


def test_the_sleep_section_names_every_larger_batch_shape_it_tried() -> None:
    """Ours is taken at its best shape as each peer is at its own: the report lists the
    larger batch sizes tried, and results from before batches of 100 were tried (one
    shape, no list) read as they did."""
    default, b50, b100 = (
        _sleep_shape(10, 2000.0),
        _sleep_shape(50, 2650.0),
        _sleep_shape(100, 2740.0),
    )
    sw = {
        "runs": [{"n": 5000, "ours": default}],
        "ours_batched": b100,
        "ours_batched_tried": [b50, b100],
        "ours_intake_batch": 100,
        "ours_resume_batch": 100,
    }
    now = "\n".join(sleep_batched(sw))
    assert "`IntakeBatchSize=100` and `ResumeBatchSize=100`" in now
    assert "50 and 50: 2650.0 runs/s; 100 and 100: 2740.0 runs/s" in now

    before = "\n".join(sleep_batched({**sw, "ours_batched": b50, "ours_batched_tried": None}))
    assert "`IntakeBatchSize=50`" in before and "larger batch sizes tried" not in before
