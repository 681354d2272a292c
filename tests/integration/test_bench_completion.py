"""The completion-policy benchmark (workload 15) measures the maps it names: each
parent's result is checked, early stops start fewer children than the map has, and a
parent that ends otherwise than the workload expects gives no figure."""

from __future__ import annotations

import pytest

from bench import completion

N = 300


def test_min_successful_stops_the_map_before_it_starts_every_child(db_url: str) -> None:
    early = completion.measure(db_url, "early", N, 0, 2, min_successful=30)

    assert early["completion"] == "min_successful_reached"
    assert early["succeeded"] >= 30
    # The starter's waves are 100 children: the count after the first one decides.
    assert early["children_started"] < N


def test_a_tolerance_exceeded_ends_the_map_with_children_left_unstarted(db_url: str) -> None:
    fail_fast = completion.measure(db_url, "fail-fast", N, 2, 2, min_successful=30)

    assert fail_fast["completion"] == "failure_tolerance_exceeded"
    assert fail_fast["failed"] > completion.TOLERATED_FAILURES
    assert fail_fast["children_started"] < N


def test_partial_failure_under_the_tolerance_runs_every_child(db_url: str) -> None:
    tolerant = completion.measure(db_url, "tolerant", 40, completion.PARTIAL_EVERY, 2, 4)

    assert tolerant == {
        "makespan_s": tolerant["makespan_s"],
        "children_started": 40,
        "succeeded": 38,
        "failed": 2,
        "completion": "all_completed",
    }


def test_a_parent_that_fails_gives_no_figure(db_url: str) -> None:
    """Half the items fail, over the 10% tolerance and without catch: the run fails,
    and the workload says so instead of timing it."""
    with pytest.raises(RuntimeError, match="completion tolerant: the parent failed"):
        completion.measure(db_url, "tolerant", 40, 2, 2, 4)


def test_a_result_other_than_expected_is_refused() -> None:
    measured = {"succeeded": 10, "failed": 0, "completion": "all_completed"}
    completion._expect("policy", measured, succeeded=10, completion="all_completed")
    with pytest.raises(RuntimeError, match="completion policy"):
        completion._expect("policy", measured, succeeded=11)
    with pytest.raises(RuntimeError, match="completion early"):
        completion._expect("early", measured, succeeded=lambda s: s >= 20)


def test_a_parallel_of_tasks_runs_every_task_on_the_pipelines_task_workers(db_url: str) -> None:
    plain = completion.measure_tasks(db_url, "tasks-plain", 30)

    assert plain == {
        "makespan_s": plain["makespan_s"],
        "attempts": 30,
        "succeeded": 30,
        "failed": 0,
        "completion": None,
    }


def test_min_successful_on_a_parallel_leaves_tasks_unrun(db_url: str) -> None:
    early = completion.measure_tasks(db_url, "tasks-early", 60)

    assert (early["completion"], early["succeeded"]) == ("min_successful_reached", 6)
    # The two workers' attempts in flight at the stop finish unheard; no other runs.
    assert 6 <= early["attempts"] <= 6 + completion.TASK_WORKERS
