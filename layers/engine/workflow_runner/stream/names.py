"""Stream and event type names, paths and run statuses: the vocabulary of the stored format."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias

from ..durations import parse_instant

RUN_STREAM = "workflow-run"
DISPATCH_STREAM = "step-dispatch"

# Stored event types (the `type` column).
RUN_STARTED = "workflow.run-started"
STEP_WAITING = "workflow.step.waiting"
STEP_WAITING_FOR_EVENT = "workflow.step.waiting-for-event"
RETRY_SCHEDULED = "workflow.retry.scheduled"
STEP_EVENT_MATCHED = "workflow.step.event-matched"
STEP_RESUMED = "workflow.step.resumed"
RUN_COMPLETED = "workflow.run-completed"
RUN_FAILED = "workflow.run-failed"
RUN_CANCELLED = "workflow.run-cancelled"
RUN_REDRIVEN = "workflow.run-redriven"
TASK_SCHEDULED = "workflow.task.scheduled"
TASK_ATTEMPT_FAILED = "workflow.task.attempt-failed"
TASK_COMPLETED = "workflow.task.completed"
TASK_FAILED = "workflow.task.failed"
TASKS_SCHEDULED = "workflow.tasks.scheduled"
CHILDREN_WAITING = "workflow.children.waiting"
CHILDREN_SETTLED = "workflow.children.settled"
CHILDREN_REQUESTED = "workflow.children.requested"
OPERATOR_ACTION = "workflow.operator-action"
RUN_MIGRATED = "workflow.run-migrated"
DISPATCH_REQUESTED = "step.dispatch-requested"
DISPATCH_ATTEMPT_FAILED = "step.dispatch-attempt-failed"
DISPATCHED = "step.dispatched"
DISPATCH_FAILED = "step.dispatch-failed"

SUSPENSION_TYPES: frozenset[str] = frozenset(
    {STEP_WAITING, STEP_WAITING_FOR_EVENT, RETRY_SCHEDULED}
)
TERMINAL_TYPES: frozenset[str] = frozenset({RUN_COMPLETED, RUN_FAILED, RUN_CANCELLED})
RETURNED_FAILURE = "returned_failure"  # the reason of a run that returned {"isSuccess": False}

# A path locates a step in the tree: one frame per level. A frame is {"i": index}
# plus, for the container it enters, {"arm": "true"|"false"} (branch), {"item": k}
# (for_each) or {"attempt": n} (retry). Paths are stored on the stream, so their
# shape is part of the storage format.
Frame: TypeAlias = dict[str, Any]
Path: TypeAlias = list[Frame]

RunStatus: TypeAlias = Literal["running", "waiting", "completed", "failed", "cancelled"]
RUN_STATUSES: tuple[RunStatus, ...] = ("running", "waiting", "completed", "failed", "cancelled")
SETTLED_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})

# "heartbeat_timeout": a callback wait whose heartbeats stopped (its own timeout: "timeout").
ResumedBy: TypeAlias = Literal[
    "event", "timeout", "timer", "forced", "task", "children", "callback", "heartbeat_timeout"
]

# A task suspension has no time of its own: it is due when its outcome is recorded.
NEVER = datetime(9999, 12, 31, tzinfo=UTC)


def instant(value: Any) -> datetime:
    """A stored instant (ISO-8601 text) as an aware datetime."""
    return parse_instant(str(value))


def optional(payload: dict[str, Any], key: str, value: Any) -> None:
    """Set `key` only when there is a value (the stored shape omits absent fields)."""
    if value is not None:
        payload[key] = value


# What 0.2 stores under `results` (see put_results): not a mapping, so 0.1 code fails.
RESULTS_MOVED = "0.2: see resultsDelta and run_results"


def put_results(
    payload: dict[str, Any],
    results: dict[str, Any] | None,
    awaited_refs: dict[str, str | None] | None,
    results_delta: dict[str, Any] | None,
    awaited_refs_delta: dict[str, str | None] | None,
) -> None:
    """Write a pass's results in the stored shape.

    Release 0.1 stored every result so far on each suspension (`results`,
    `awaitedRefs`); since 0.2 a pass stores only what it wrote (`resultsDelta`,
    `awaitedRefsDelta`), so each result is recorded once. A key is in at most one of a
    delta's two maps: a result supersedes an awaited reference and vice versa.
    """
    for key, value in (
        ("results", results),
        ("awaitedRefs", awaited_refs),
        ("resultsDelta", results_delta),
        ("awaitedRefsDelta", awaited_refs_delta),
    ):
        if value is not None:
            payload[key] = value
    if results is None and results_delta is not None:
        # 0.1 code still running during a deploy would read a missing `results` as "no
        # results" and resume the run without them; a string makes it fail the resume
        # instead (the message returns to the queue until the new code takes it).
        payload["results"] = RESULTS_MOVED


def take_results(p: Any) -> dict[str, Any]:
    """The four result fields of a stored payload (None where absent)."""

    def optional_dict(key: str) -> dict[str, Any] | None:
        value = p.get(key)
        return None if value is None or value == RESULTS_MOVED else dict(value)

    return {
        "results": optional_dict("results"),
        "awaited_refs": optional_dict("awaitedRefs"),
        "results_delta": optional_dict("resultsDelta"),
        "awaited_refs_delta": optional_dict("awaitedRefsDelta"),
    }
