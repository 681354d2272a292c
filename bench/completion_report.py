"""The completion-policy section of docs/BENCHMARKS.md (workload 15)."""

from __future__ import annotations

from typing import Any

from .report_format import table


def completion_section(completion: dict[str, Any] | None) -> list[str]:
    """Workload 15, when the results have it."""
    if not completion:
        return []
    n, spans = completion["n"], completion["makespans_s"]
    early, fail_fast = completion["early_stop"], completion["fail_fast"]
    generated = (
        f" (run {completion['generated_at']}, alone)" if completion.get("generated_at") else ""
    )

    def best(name: str) -> float:
        return float(min(spans[name]))

    rows = [
        ["no policy", "none fail", "all at once", _spans(spans["plain"]), n, "-"],
        ["`Completion()`", "none fail", "all at once", _spans(spans["policy"]), n, "all_completed"],
        [
            "`catch=True`, no policy",
            "every 20th",
            "all at once",
            _spans(spans["catch"]),
            n,
            "-",
        ],
        [
            "`Completion(tolerated_failure_pct=10)`",
            "every 20th",
            "all at once",
            _spans(spans["tolerant"]),
            n,
            "all_completed",
        ],
        [
            f"`Completion(min_successful={early['min_successful']})`",
            "none fail",
            "all at once",
            early["early"]["makespan_s"],
            early["early"]["children_started"],
            early["early"]["completion"],
        ],
        [
            "`Completion(tolerated_failures=10)`, `catch=True`",
            "every other",
            "all at once",
            fail_fast["makespan_s"],
            fail_fast["children_started"],
            fail_fast["completion"],
        ],
    ]
    return [
        "",
        f"## 15. Completion policies{generated}",
        "",
        f"One parent maps {n:,} items onto one-step children (the side-by-side fan-out's "
        'child, which returns `{"isSuccess": false}` for the items the event names as '
        "failing) through the same pipeline and child starter; every parent's result is "
        "checked (its successes, failures and how the step ended) before its figure is "
        "kept. The overhead and partial-failure maps ran three times each, alternating; "
        "the ratios take the best of each.",
        "",
        *table(
            ["map", "failing items", "at once", "makespan s", "children started", "ended"],
            rows,
        ),
        "",
        f"**Overhead**: a map with `Completion()` takes {completion['overhead_ratio']}x the "
        f"time of the same map without a policy ({best('policy')} against {best('plain')} s)."
        " The policy is a value stored with the join; the worker that counts settled "
        "children decides it in Python (workflow_runner.definition.completion) in the "
        "count's own transaction, and the parent's resume reads its children's outcomes "
        "with the one statement it reads them with anyway (join_outcomes). Counted with "
        "pg_stat_statements (one map of each over 2,000 children, 2026-12-05): the same "
        "statements the same number of times with and without a policy, 401-433 in all for "
        "the whole map, none of them once a child, and the policy's maps 416 ms of "
        "statement execution against 472 and 512 for the plain map and `catch=True`. "
        "The ratio moves with the machine: four runs of this workload alone the same day "
        "gave 1.02, 1.01 and 1.11 (best of two each) and 0.98 (best of three), and a "
        "map's makespan moved "
        "by 10-15% between rounds of the same map within one run.",
        "",
        f"**Partial failure** ({completion['partial_failures']} of {n:,} children fail): "
        "the policy against the hand-made way (`catch=True`, each failure holds its place "
        f"and the parent filters): {completion['partial_failure_ratio_vs_catch']}x "
        f"({best('tolerant')} against {best('catch')} s). Both run every child; the "
        "policy adds the tolerance check and the `failures` list, not work per child.",
        "",
        f"**Early stop**: with `min_successful={early['min_successful']}` and every child "
        f"allowed at once the step ended after {early['early']['children_started']:,} of "
        f"{n:,} children had started, in {early['early']['makespan_s']} s against "
        f"{best('plain')} s for the whole map ({completion['early_stop_speedup']}x sooner; "
        "the parent's own start and end are in both). It stops at a count, not at a "
        "child: the worker starts up to 100 children of a map a transaction, one batch a "
        "map between two counts, and a one-step child ends in its first pass, so each "
        "batch has finished by the count that sees it and the step ends at the first "
        "count that reaches the minimum. The children never started never start (their "
        "rows are marked in the count's transaction). Before this round one call of the "
        "starter started up to ten batches of one map before a count: 1,000 of these "
        "2,000 children started for `min_successful=200`.",
        "",
        f"**Fail fast**: every other item fails and `tolerated_failures=10`: "
        f"{fail_fast['children_started']:,} of {n:,} children started, "
        f"{fail_fast['failed']} of them failed, and the step ended as "
        f"`{fail_fast['completion']}` after {fail_fast['makespan_s']} s (the first count "
        "saw more than ten failures).",
        "",
        *_parallel_tasks(completion.get("parallel_tasks")),
        "No issue set targets for this workload; it has none in bench/run.py.",
    ]


def _parallel_tasks(par: dict[str, Any] | None) -> list[str]:
    """The same policies on a parallel of tasks, when the results have it."""
    if not par:
        return []
    k, spans, early = par["tasks"], par["makespans_s"], par["early_stop"]
    rows = [
        ["no policy", _spans(spans["tasks-plain"]), k, "-"],
        ["`Completion()`", _spans(spans["tasks-policy"]), k, "all_completed"],
        [
            f"`Completion(min_successful={early['min_successful']})`",
            early["early"]["makespan_s"],
            early["early"]["attempts"],
            early["early"]["completion"],
        ],
    ]
    return [
        f"**A parallel of tasks.** One parent runs `s.parallel` of {k:,} one-attempt tasks "
        f"(each returns its index) on {par['task_workers']} task workers, StepDispatcher's "
        "engine call (`engine.worker.work`) in a loop each, beside the same pipeline; none "
        "fails. Here the policy is decided by each task's outcome, in the transaction "
        "that records it, and a stop cancels the tasks not yet claimed in that "
        "transaction. The plain and `Completion()` parallels ran three times each, "
        "alternating.",
        "",
        *table(["parallel", "makespan s", "task attempts", "ended"], rows),
        "",
        f"`Completion()` takes {par['overhead_ratio']}x the time of the parallel without a "
        f"policy. With `min_successful={early['min_successful']}` the workers ran "
        f"{early['early']['attempts']:,} of the {k:,} tasks (the ones claimed when the "
        "stop was recorded finish unheard) and the step ended "
        f"{par['early_stop_speedup']}x sooner than the whole parallel.",
        "",
        "A parallel's time grows with the square of its size: each attempt reads its run's "
        "events since the parallel began, and so does each outcome, so the last of N tasks "
        "reads N outcomes twice. Without a policy on two task workers (2026-12-06, one "
        "round each): 100 tasks 0.50 s, 200 1.36 s, 400 4.73 s. A map's children settle "
        "into rows of its join instead (2,000 in 0.63 s above), so hundreds of items are a "
        "map's ([Limits](reference/limits.md)). Building this workload found outcomes "
        "lost: with four task workers, 7 of a parallel's 200 outcomes each lost the run's "
        "next version to other outcomes six times running, were taken for a run that had "
        "moved on and dropped, and the parallel waited forever; since 02b9610 the "
        "outcomes of one run queue on a lock of the run (engine/task_outcomes.py), and "
        "since a28f5e7 its callback answers with them.",
        "",
    ]


def _spans(values: list[float]) -> str:
    return ", ".join(str(v) for v in values)
