"""Workload 15: completion policies — what a policy costs a map, against the map without
one and against the hand-made partial failure (`catch=True`), and what ending early saves.

Every parent maps N items onto one-step children (`bench-outcome-child`: it returns its
item's index, or `{"isSuccess": False}` for the items the event names as failing), the
same children as the fan-out side by side (9b), through the same pipeline and child
starter. Four comparisons, each map measured on a fresh database:

- **overhead**: nothing fails, all children allowed at once; the map without a policy
  against the same map with `Completion()` (the policy is stored with the join and
  decided at every count; its batch result is built at the end). Alternating, the
  better of three each, as flow control's overhead (the machine is shared).
- **partial failure**: every 20th item fails (5%), all at once; `catch=True` without a
  policy (each failure holds its place, the parent goes on when all settled: what a
  user wrote before policies) against `Completion(tolerated_failure_pct=10)`. Also the
  better of three each.
- **early stop**: nothing fails, all at once; `Completion(min_successful=N/10)`, which
  ends the step once that many succeeded, against the map without a policy above: the
  children it never started are the work it saved.
- **fail fast**: every other item fails, all at once, `Completion(tolerated_failures=
  10)` with `catch=True`: how many children ran before the step ended.

The same policies on `s.parallel` of tasks (N / TASK_SHARE one-attempt tasks that each
return their index, run by TASK_WORKERS task workers: StepDispatcher's engine call,
`engine.worker.work`): the parallel without a policy against `Completion()` (the
better of three each, alternating), and `Completion(min_successful=tasks/10)`, whose
stop leaves the tasks not yet claimed unrun. A task's outcome decides the policy in
its own transaction, so this prices that, where the map's count decides it.

Each parent's result is checked (its counts of successes and failures and how the step
ended), so a figure never comes from a map that did something else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from workflow_runner import (
    Completion,
    DomainEvent,
    Event,
    RetryPolicy,
    WorkflowRegistry,
    define_workflow,
    on_call,
    on_event,
)
from workflow_runner.stream.names import RUN_COMPLETED

from .common import TENANT, fresh_database
from .fan_out import join_parent

CHILD = "bench-outcome-child"
ALL_AT_ONCE = 10_000
PARTIAL_EVERY = 20  # every 20th item fails: 5%
TOLERATED_PCT = 10
TOLERATED_FAILURES = 10
ROUNDS = 3  # each of the overhead and partial-failure pairs: the best of three
TASK_SHARE = 10  # the parallel of tasks has N / TASK_SHARE of them
TASK_WORKERS = 2  # StepDispatcher invocations at once
ONCE = RetryPolicy(max_attempts=1)
# name: completion policy of the parallel of tasks (and `tasks-early`, made with its N)
TASK_PARENTS: dict[str, Completion | None] = {"tasks-plain": None, "tasks-policy": Completion()}

# name: (completion policy, catch, concurrency)
PARENTS: dict[str, tuple[Completion | None, bool, int]] = {
    "plain": (None, False, ALL_AT_ONCE),
    "policy": (Completion(), False, ALL_AT_ONCE),
    "catch": (None, True, ALL_AT_ONCE),
    "tolerant": (Completion(tolerated_failure_pct=TOLERATED_PCT), False, ALL_AT_ONCE),
    "fail-fast": (Completion(tolerated_failures=TOLERATED_FAILURES), True, ALL_AT_ONCE),
}


def _summary(ctx: Any) -> dict[str, Any]:
    """What the parent returns: the batch result's counts, or a plain list's."""
    batch = ctx.steps["all"]
    if isinstance(batch, dict):
        return {k: batch[k] for k in ("succeeded", "failed", "completion")}
    failed = sum(1 for r in batch if isinstance(r, dict) and r.get("failed"))
    return {"succeeded": len(batch) - failed, "failed": failed, "completion": None}


def registry(min_successful: int, tasks: int = 0) -> WorkflowRegistry:
    """The one-step child and one parent per PARENTS entry, plus `early` (ends once
    `min_successful` children succeeded); with `tasks`, the parallels of that many
    tasks too (TASK_PARENTS, and `tasks-early`, which ends once a tenth succeeded)."""
    reg = WorkflowRegistry()
    reg.register(
        define_workflow(
            name=CHILD,
            trigger=on_call(),
            steps=lambda s: [
                s.branch(
                    if_=Event.payload["fail"],
                    on_true=[s.return_({"isSuccess": False, "error": "refused"})],
                    on_false=[s.return_(lambda ctx: ctx.event.payload["i"])],
                ),
            ],
            register=False,
        )
    )
    parents = {
        **PARENTS,
        "early": (Completion(min_successful=min_successful), False, ALL_AT_ONCE),
    }
    for name, (completion, catch, concurrency) in parents.items():
        reg.register(_parent(name, completion, catch, concurrency))
    if tasks:
        early = Completion(min_successful=max(1, tasks // 10))
        for name, policy in {**TASK_PARENTS, "tasks-early": early}.items():
            reg.register(_task_parent(name, tasks, policy))
    return reg


def _answer(i: int) -> Callable[[Any], dict[str, int]]:
    return lambda ctx: {"i": i}


def _task_parent(name: str, tasks: int, completion: Completion | None) -> Any:
    return _summing_parent(
        name,
        lambda s: s.parallel(
            *[s.task(f"t{i}", _answer(i), retry=ONCE) for i in range(tasks)],
            result_key="all",
            completion=completion,
        ),
    )


def _parent(name: str, completion: Completion | None, catch: bool, concurrency: int) -> Any:
    def items(ctx: Any) -> list[dict[str, Any]]:
        every = ctx.event.payload["fail_every"]
        return [
            {"i": i, "fail": bool(every) and i % every == 0} for i in range(ctx.event.payload["n"])
        ]

    return _summing_parent(
        name,
        lambda s: s.map(
            items,
            workflow=CHILD,
            concurrency=concurrency,
            result_key="all",
            catch=catch,
            completion=completion,
        ),
    )


def _summing_parent(name: str, step: Callable[[Any], Any]) -> Any:
    """Parent `name` (one run per event id): `step`, which stores its batch under `all`,
    then the batch's counts (`_summary`)."""
    return define_workflow(
        name=f"bench-completion-{name}",
        trigger=on_event(f"bench.completion.{name}"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [step(s), s.return_(_summary)],
        register=False,
    )


def _parent_result(url: str, run_id: str) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT payload -> 'result' FROM wf_events WHERE stream_id = %s AND type = %s",
            (run_id, RUN_COMPLETED),
        ).fetchone()
    if row is None:
        raise RuntimeError(f"completion: parent {run_id} has no completion")
    return dict(row[0])


def measure(
    url: str, name: str, n: int, fail_every: int, workers: int, min_successful: int
) -> dict[str, Any]:
    """One parent `name` over N children on database `url` (items `i % fail_every == 0`
    fail; 0: none): its makespan, the children the starter started, and the parent's
    result (its counts and how the step ended)."""
    event = DomainEvent(
        id=f"completion-{name}",
        type=f"bench.completion.{name}",
        payload={"id": name, "n": n, "fail_every": fail_every},
        tenant_id=TENANT,
        source="bench",
    )
    joined = join_parent(url, registry(min_successful), event, workers)
    if joined.outcome != "completed":
        raise RuntimeError(f"completion {name}: the parent {joined.outcome}")
    return {
        "makespan_s": round(joined.makespan_s, 3),
        "children_started": joined.stats.children_started,
        **_parent_result(url, joined.run_id),
    }


def measure_tasks(url: str, name: str, tasks: int) -> dict[str, Any]:
    """One parallel parent `name` of `tasks` tasks on database `url`, TASK_WORKERS task
    workers: its makespan, the attempts the workers ran, and the parent's result."""
    event = DomainEvent(
        id=f"completion-{name}",
        type=f"bench.completion.{name}",
        payload={"id": name},
        tenant_id=TENANT,
        source="bench",
    )
    joined = join_parent(url, registry(1, tasks), event, 4, task_workers=TASK_WORKERS)
    if joined.outcome != "completed":
        raise RuntimeError(f"completion {name}: the parent {joined.outcome}")
    return {
        "makespan_s": round(joined.makespan_s, 3),
        "attempts": joined.stats.task_attempts,
        **_parent_result(url, joined.run_id),
    }


def run_tasks(admin_url: str, tasks: int) -> dict[str, Any]:
    """The parallels of tasks (see the module docstring): figures and ratios."""

    def one(name: str) -> dict[str, Any]:
        with fresh_database(admin_url, "bench_completion_tasks") as url:
            return measure_tasks(url, name, tasks)

    pairs: dict[str, list[dict[str, Any]]] = {name: [] for name in TASK_PARENTS}
    for _ in range(ROUNDS):
        for name in TASK_PARENTS:
            pairs[name].append(one(name))
    for m in pairs["tasks-plain"]:
        _expect("tasks-plain", m, succeeded=tasks, failed=0, attempts=tasks)
    for m in pairs["tasks-policy"]:
        _expect("tasks-policy", m, succeeded=tasks, completion="all_completed", attempts=tasks)
    least = max(1, tasks // 10)
    early = one("tasks-early")
    _expect("tasks-early", early, completion="min_successful_reached", succeeded=least)
    best = {k: min(m["makespan_s"] for m in v) for k, v in pairs.items()}
    return {
        "tasks": tasks,
        "task_workers": TASK_WORKERS,
        "makespans_s": {k: [m["makespan_s"] for m in v] for k, v in pairs.items()},
        "overhead_ratio": round(best["tasks-policy"] / best["tasks-plain"], 3),
        "early_stop": {"min_successful": least, "early": early},
        "early_stop_speedup": round(best["tasks-plain"] / early["makespan_s"], 2),
        "early_stop_attempts": early["attempts"],
    }


def _expect(name: str, measured: dict[str, Any], **wanted: Any) -> None:
    wrong = {k: (measured.get(k), v) for k, v in wanted.items() if not _fits(measured.get(k), v)}
    if wrong:
        raise RuntimeError(f"completion {name}: (got, wanted) {wrong}")


def _fits(got: Any, wanted: Any) -> bool:
    return bool(wanted(got)) if callable(wanted) else bool(got == wanted)


def run(admin_url: str, n: int, workers: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The four comparisons of the module docstring; figures and ratios."""
    log(f"15 completion policies: maps over {n:,} one-step children")
    least = n // 10
    failing = len(range(0, n, PARTIAL_EVERY))  # the items `_parent` makes fail

    def one(name: str, fail_every: int = 0) -> dict[str, Any]:
        with fresh_database(admin_url, "bench_completion") as url:
            return measure(url, name, n, fail_every, workers, least)

    pairs: dict[str, list[dict[str, Any]]] = {
        k: [] for k in ("plain", "policy", "catch", "tolerant")
    }
    for _ in range(ROUNDS):
        for name in ("plain", "policy"):
            pairs[name].append(one(name))
        for name in ("catch", "tolerant"):
            pairs[name].append(one(name, PARTIAL_EVERY))
    for m in pairs["plain"]:
        _expect("plain", m, succeeded=n, failed=0)
    for m in pairs["policy"]:
        _expect("policy", m, succeeded=n, failed=0, completion="all_completed")
    for m in pairs["catch"]:
        _expect("catch", m, succeeded=n - failing, failed=failing)
    for m in pairs["tolerant"]:
        _expect("tolerant", m, succeeded=n - failing, failed=failing, completion="all_completed")
    early = one("early")
    _expect("early", early, completion="min_successful_reached", succeeded=lambda s: s >= least)
    fail_fast = one("fail-fast", 2)
    _expect(
        "fail-fast",
        fail_fast,
        completion="failure_tolerance_exceeded",
        failed=lambda f: f > TOLERATED_FAILURES,
    )
    best = {k: min(m["makespan_s"] for m in v) for k, v in pairs.items()}
    figures = {
        "n": n,
        "workers": workers,
        "makespans_s": {k: [m["makespan_s"] for m in v] for k, v in pairs.items()},
        "overhead_ratio": round(best["policy"] / best["plain"], 3),
        "partial_failure_ratio_vs_catch": round(best["tolerant"] / best["catch"], 3),
        "partial_failures": failing,
        "early_stop": {"min_successful": least, "early": early},
        "early_stop_speedup": round(best["plain"] / early["makespan_s"], 2),
        "early_stop_children_started": early["children_started"],
        "fail_fast": fail_fast,
        "fail_fast_children_started": fail_fast["children_started"],
        "parallel_tasks": run_tasks(admin_url, max(10, n // TASK_SHARE)),
    }
    log(
        f"  overhead {figures['overhead_ratio']} (policy against none), partial failure"
        f" {figures['partial_failure_ratio_vs_catch']} (policy against catch); early stop:"
        f" {early['children_started']} of {n} children started, {best['plain']} s ->"
        f" {early['makespan_s']} s; fail fast: {fail_fast['children_started']} started,"
        f" {fail_fast['failed']} failed"
    )
    par = figures["parallel_tasks"]
    log(
        f"  a parallel of {par['tasks']} tasks: overhead {par['overhead_ratio']} (policy"
        f" against none); early stop: {par['early_stop_attempts']} of {par['tasks']} tasks"
        f" run, {par['early_stop_speedup']}x sooner"
    )
    return figures
