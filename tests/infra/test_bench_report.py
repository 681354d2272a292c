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
