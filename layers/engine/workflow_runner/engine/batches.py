"""What a map or a parallel with a completion policy yields when its run resumes: the
batch result (definition/completion.py) built from how each item ended, and the
failure the resume raises when a tolerance was exceeded and the step does not catch.

The decision itself was taken before the resume, by whoever recorded the outcome that
decided it (the worker counting a map's children, the task worker recording a
parallel's task outcome) and is on the run's stream: a map's ChildrenSettled carries
it, a parallel's is the one its recorded outcomes give (a stopped parallel records no
outcome after the stop). Items the stop ended (never started, cancelled, or left to
another owner) are `stopped`: None in the results, not failures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..definition.completion import (
    ALL_COMPLETED,
    COMPLETION_REASONS,
    FAILURE_TOLERANCE_EXCEEDED,
    CompletionReason,
    ItemOutcome,
    batch_result,
    decide,
)
from ..pass_result import ToleranceExceededError
from ..store import ChildOutcome
from ..stream import ChildrenWaiting, RunState, StepStopped, TaskCompleted, TasksScheduled


def map_batch(
    suspension: ChildrenWaiting, work: RunState, children: list[ChildOutcome]
) -> dict[str, Any]:
    """The batch result of a map with a completion policy (`children`: its join's rows,
    in item order)."""
    items = [_child_item(child, work.stopped) for child in children]
    decided = work.children_settled.completion if work.children_settled else None
    return batch_result(items, _decided(suspension, items, decided))


def _child_item(child: ChildOutcome, stopped: StepStopped | None) -> ItemOutcome:
    if stopped is not None and child.item_index in stopped.stopped_items:
        return ItemOutcome("stopped")
    if child.status == "completed":
        return ItemOutcome("succeeded", child.result)
    if child.status in ("failed", "cancelled") and child.started:
        return ItemOutcome("failed", reason=child.reason or child.status, ref=_run(child))
    return ItemOutcome("stopped")  # never started (or still running for another owner)


def _run(child: ChildOutcome) -> dict[str, str]:
    return {"runId": child.child_run_id}


def parallel_batch(
    suspension: TasksScheduled, work: RunState, results: Mapping[str, Any]
) -> dict[str, Any]:
    """The batch result of a parallel with a completion policy, in the step's task
    order (`results`: the run's results, which hold what a redrive kept)."""
    by_key = {task.task_key: task for task in suspension.tasks}
    items = []
    for key in suspension.keys:
        task = by_key.get(key)
        outcome = work.task_outcomes.get(task.task_id) if task is not None else None
        if task is None:
            items.append(ItemOutcome("succeeded", results.get(key)))  # kept by a redrive
        elif isinstance(outcome, TaskCompleted):
            items.append(ItemOutcome("succeeded", outcome.result))
        elif outcome is not None:
            ref = {"taskKey": key, "error": outcome.error_class}
            items.append(ItemOutcome("failed", reason=outcome.reason, ref=ref))
        else:
            items.append(ItemOutcome("stopped"))
    return batch_result(items, _decided(suspension, items, work.parallel_completion))


def _decided(
    suspension: ChildrenWaiting | TasksScheduled,
    items: list[ItemOutcome],
    recorded: str | None,
) -> CompletionReason:
    """The decision recorded on the stream; for a stream without one, what the policy
    says of the items (every item settled: all_completed at the least)."""
    for reason in COMPLETION_REASONS:
        if recorded == reason:
            return reason
    assert suspension.completion is not None
    succeeded = sum(1 for item in items if item.status == "succeeded")
    failed = sum(1 for item in items if item.status == "failed")
    return decide(suspension.completion, len(items), succeeded, failed) or ALL_COMPLETED


def tolerance_failure(
    suspension: ChildrenWaiting | TasksScheduled, work: RunState
) -> ToleranceExceededError | None:
    """The failure a resume raises at a map or parallel whose completion policy ended
    it with a tolerance exceeded, unless it catches; None otherwise."""
    if suspension.completion is None or suspension.catch:
        return None
    if isinstance(suspension, ChildrenWaiting):
        settled = work.children_settled
        if settled is not None and settled.completion == FAILURE_TOLERANCE_EXCEEDED:
            return ToleranceExceededError("map", settled.failed)
        return None
    if work.parallel_completion == FAILURE_TOLERANCE_EXCEEDED:
        failed = sum(
            1
            for task in suspension.tasks
            if task.task_id in work.task_outcomes
            and not isinstance(work.task_outcomes[task.task_id], TaskCompleted)
        )
        return ToleranceExceededError("parallel", failed)
    return None
