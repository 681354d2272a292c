"""The benchmark report's history of full runs: every full run is recorded once, runs
made one after the other on one tree form a set, and a set of three is judged as the
benchmark issues judge a claim (a target met in at least two of the three)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.report_history import (
    HISTORY,
    history_section,
    latest_full_runs,
    load_history,
    record_full_run,
    sets_of_runs,
)

ROOT = Path(__file__).resolve().parents[2]

TARGETS = {
    "event_wait.ratio_vs_absurd": {"target": ">= 5.0"},
    "wakeup.p99_ms": {"target": "<= 15.0"},
}


def _results(
    at: str, commit: str, ratio: float | None, p99: float, took: float = 800.0
) -> dict[str, Any]:
    targets: dict[str, dict[str, Any]] = {
        "wakeup.p99_ms": {"value": p99, "target": "<= 15.0", "met": p99 <= 15}
    }
    if ratio is not None:
        targets["event_wait.ratio_vs_absurd"] = {"value": ratio, "target": ">= 5.0"}
    return {
        "mode": "full",
        "generated_at": at,
        "duration_s": took,
        "versions": {"git_commit": commit},
        "backlog_drain": {"commit_rate_one_connection": {"commits_per_s": 4573.8}},
        "targets": targets,
    }


def _history(tmp_path: Path, *results: dict[str, Any]) -> list[dict[str, Any]]:
    path = tmp_path / "full_runs.json"
    for one in results:
        record_full_run(one, path)
    return load_history(path)


def test_a_full_run_is_recorded_once_and_in_time_order(tmp_path: Path) -> None:
    later = _results("2026-12-05T22:31:39+00:00", "b451600", 3.06, 8.48)
    earlier = _results("2026-12-05T22:18:20+00:00", "b451600", 3.14, 8.85)

    runs = _history(tmp_path, later, earlier, later)

    assert [run["generated_at"] for run in runs] == [
        "2026-12-05T22:18:20+00:00",
        "2026-12-05T22:31:39+00:00",
    ]
    assert runs[0]["event_wait.ratio_vs_absurd"] == 3.14
    assert runs[0]["git_commit"] == "b451600"


def test_the_runs_set_beside_a_new_one_are_the_last_recorded_newest_first(
    tmp_path: Path,
) -> None:
    path = tmp_path / "full_runs.json"
    assert latest_full_runs(path=path) == []
    for at in ("22:18:20", "22:44:33", "22:31:39"):
        record_full_run(_results(f"2026-12-05T{at}+00:00", "b451600", 3.0, 8.0), path)

    latest = [run["generated_at"][11:19] for run in latest_full_runs(path=path)]

    assert latest == ["22:44:33", "22:31:39"]


def test_runs_of_one_tree_one_after_the_other_are_one_set(tmp_path: Path) -> None:
    runs = _history(
        tmp_path,
        _results("2026-12-05T22:18:20+00:00", "b451600", 3.14, 8.85, took=797.6),
        _results("2026-12-05T22:31:39+00:00", "b451600", 3.06, 8.48, took=772.1),
        # another tree right after: a set of its own
        _results("2026-12-05T22:44:33+00:00", "e319691", 3.36, 8.64, took=802.8),
        # the same tree again, but an hour after the run before it ended
        _results("2026-12-06T00:10:00+00:00", "e319691", 3.2, 8.0),
    )

    assert [len(one) for one in sets_of_runs(runs)] == [2, 1, 1]


def test_a_set_of_three_names_the_targets_met_in_fewer_than_two(tmp_path: Path) -> None:
    """A row a set names what it met in fewer than two runs (5.0 meets >= 5.0); a row
    a run gives its figures (the peers' ratios in one table, ours in another), each
    that misses its target in bold."""
    runs = _history(
        tmp_path,
        _results("2026-12-05T22:18:20+00:00", "b451600", 5.2, 15.2),
        _results("2026-12-05T22:31:39+00:00", "b451600", 4.9, 8.48),
        _results("2026-12-05T22:44:33+00:00", "b451600", 5.0, 16.0),
        _results("2026-12-06T09:00:00+00:00", "c000001", 6.0, 7.0),
    )

    text = "\n".join(history_section(runs, TARGETS))

    assert "| b451600 | 2026-12-05 22:18 | 3 | wakeup p99 ms |" in text
    assert "| c000001 | 2026-12-06 09:00 | 1 | (no claim: 1 run) |" in text
    ratios = ["| b451600 | 12-05 22:18 | 5.2 |", "| b451600 | 12-05 22:31 | **4.9** |"]
    own = ["| b451600 | 12-05 22:18 | **15.2** | 4,574 |", "| b451600 | 12-05 22:31 | 8.48 |"]
    assert all(row in text for row in [*ratios, *own])
    assert "| b451600 | 12-05 22:44 | 5 |" in text and "| b451600 | 12-05 22:44 | **16** |" in text
    assert "| c000001 | 12-06 09:00 | 6 |" in text and "| c000001 | 12-06 09:00 | 7 |" in text


def test_a_longer_set_is_a_claim_when_any_three_consecutive_runs_are(
    tmp_path: Path,
) -> None:
    """Four runs in a row on one tree: a target met in the first two holds (the first
    three are a claim); met in the first and the last only, no three of them hold it."""
    starts = ["22:00", "22:14", "22:28", "22:42"]

    def four(ratios: list[float]) -> list[dict[str, Any]]:
        where = tmp_path / "-".join(map(str, ratios))
        where.mkdir()
        return _history(
            where,
            *[
                _results(f"2026-12-05T{at}:00+00:00", "b451600", ratio, 8.0)
                for at, ratio in zip(starts, ratios, strict=True)
            ],
        )

    early = "\n".join(history_section(four([5.1, 5.2, 3.0, 3.1]), TARGETS))
    apart = "\n".join(history_section(four([5.1, 3.0, 3.1, 5.2]), TARGETS))

    assert "| b451600 | 2026-12-05 22:00 | 4 | none |" in early
    assert "| b451600 | 2026-12-05 22:00 | 4 | event wait / Absurd |" in apart


def test_a_figure_that_is_no_claim_is_marked_and_counts_in_no_set(tmp_path: Path) -> None:
    """A figure read afterwards as not comparable (the run's `no_claim`, with its reason)
    is shown as such and judged as not measured: met once in the two runs left, the
    set misses the target it would otherwise have met in two of three."""
    runs = _history(
        tmp_path,
        _results("2026-12-05T15:05:47+00:00", "e821da6", 4.0, 8.0),
        _results("2026-12-05T15:17:39+00:00", "e821da6", 5.1, 8.0),
        _results("2026-12-05T15:29:45+00:00", "e821da6", 9.45, 8.0),
    )
    runs[2]["no_claim"] = {"event_wait.ratio_vs_absurd": "the peer's best shape did not run"}

    text = "\n".join(history_section(runs, TARGETS))

    assert "| e821da6 | 2026-12-05 15:05 | 3 | event wait / Absurd |" in text
    assert "| e821da6 | 12-05 15:29 | 9.45 (no claim) |" in text
    del runs[2]["no_claim"]
    assert "| e821da6 | 2026-12-05 15:05 | 3 | none |" in "\n".join(history_section(runs, TARGETS))


def test_sets_that_did_not_measure_every_target_are_left_out(tmp_path: Path) -> None:
    """Runs from before a workload existed are history, not a set the table judges."""
    runs = _history(
        tmp_path,
        _results("2026-11-30T18:13:00+00:00", "1cc961e", None, 30.0),
        _results("2026-12-05T22:18:20+00:00", "b451600", 3.14, 8.85),
    )

    text = "\n".join(history_section(runs, TARGETS))

    assert "b451600" in text
    assert "1cc961e" not in text
    assert history_section(runs[:1], TARGETS) == []


def test_the_committed_results_are_in_the_committed_history() -> None:
    """`make bench` records each full run in bench/full_runs.json as it writes
    bench/results.json, so a full run's results never reach the repository without it."""
    results = json.loads((ROOT / "bench" / "results.json").read_text())
    if results.get("mode") != "full":
        return
    recorded = {run["generated_at"]: run for run in load_history(HISTORY)}
    assert results["generated_at"] in recorded
    for earlier in results.get("earlier_full_runs", []):
        # The history may know more of a run than its headline did when it was written
        # (the host's commit rate, filled in later from the run's results).
        known = recorded[earlier["generated_at"]]
        assert {key: known[key] for key in earlier} == earlier
