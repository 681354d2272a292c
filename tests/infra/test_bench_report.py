"""The benchmark report's table of consecutive full runs says whether they ran on one
tree: a claim from three runs holds only if the code did not change between them."""

from __future__ import annotations

from typing import Any

from bench.report import _consecutive_runs, headline


def _run(at: str, commit: str, value: float) -> dict[str, Any]:
    return {
        "mode": "full",
        "generated_at": at,
        "versions": {"git_commit": commit},
        "targets": {"wakeup.p99_ms": {"value": value, "target": "<= 15.0", "met": True}},
    }


def _text(runs: list[dict[str, Any]]) -> str:
    latest = runs[-1]
    latest["earlier_full_runs"] = [headline(r) for r in reversed(runs[:-1])]
    return "\n".join(_consecutive_runs(latest))


def test_runs_of_one_commit_are_reported_as_the_same_tree() -> None:
    text = _text([_run("t1", "abc1234", 9.0), _run("t2", "abc1234", 8.0)])
    assert "Same tree (abc1234)" in text
    assert "| wakeup.p99_ms | 9 | 8 | <= 15.0 |" in text


def test_runs_of_different_commits_name_each_tree() -> None:
    text = _text([_run("t1", "abc1234", 9.0), _run("t2", "def5678", 8.0)])
    assert "Same tree" not in text
    assert "trees abc1234, def5678" in text


def test_runs_a_day_apart_are_not_reported_as_one_after_the_other() -> None:
    """The earlier runs are those the results file held before: a run a day later
    replaces them, and the three are no claim of consecutive runs."""
    first = _run("2026-12-03T16:55:37+00:00", "abc1234", 9.0)
    second = _run("2026-12-03T17:11:57+00:00", "abc1234", 8.0)
    third = _run("2026-12-04T19:37:22+00:00", "def5678", 7.0)
    for run, seconds in ((first, 931.0), (second, 939.3), (third, 773.3)):
        run["duration_s"] = seconds

    text = _text([first, second, third])

    assert "Not one after the other" in text
    assert "One after the other" not in text and "Same tree" not in text


def test_runs_started_within_a_pause_of_the_one_before_are_one_after_the_other() -> None:
    first = _run("2026-12-04T18:46:15+00:00", "abc1234", 9.0)
    second = _run("2026-12-04T19:02:11+00:00", "abc1234", 8.0)
    first["duration_s"] = 803.1

    text = _text([first, second])

    assert "Same tree (abc1234), one after the other" in text
