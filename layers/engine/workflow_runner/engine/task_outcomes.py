"""Recording a task attempt's outcome on the run stream (the task worker's writes).

The outcome is appended at the stream's current version after checking, in the same
transaction, that the run still waits at this task without an outcome: the append is
what makes an attempt count once when two workers ran it (a lease that ran out). A
final outcome also marks the run's pending row due; the caller enqueues the resume.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Literal

from ..definition import RetryPolicy
from ..errors import TransientStoreError
from ..flow.tasks import release_task_slots
from ..store import ClaimedTask, Store
from ..stream import (
    RUN_STREAM,
    RecordedFact,
    RunState,
    StepStopped,
    TaskAttemptFailed,
    TaskCompleted,
    TaskFailed,
    TasksScheduled,
)
from .passes import load_run_for_pass
from .projection import TASK_OUTCOME

_APPEND_TRIES = 5


class AttemptFailure(Exception):
    """An attempt failed: `final` when no attempt may follow; `reason` is the task's
    when it ends with this failure (attempts_exhausted when the attempts ran out,
    unless `keeps_reason`)."""

    def __init__(
        self,
        error_class: str,
        final: bool,
        reason: str,
        status: int | None = None,
        keeps_reason: bool = False,
    ) -> None:
        super().__init__(error_class)
        self.error_class = error_class
        self.final = final
        self.reason = reason
        self.status = status
        self.keeps_reason = keeps_reason


TaskFact = TaskAttemptFailed | TaskCompleted | TaskFailed


def _append(
    store: Store,
    task: ClaimedTask,
    build: Callable[[int], TaskFact],
    now: datetime,
    known: RunState | None = None,
) -> tuple[int, bool] | None:
    """Append a task fact at the run stream's current version, in the caller's
    transaction (first in it), while the run still waits at this task without an
    outcome. Returns the suspension's version and whether the run is now due (every
    task of a parallel settled, or one failed uncaught, or its completion policy
    decided: then the tasks left are stopped), or None when the run moved on
    (cancelled, stopped, or another worker recorded the outcome first). `build` makes
    the fact for a version.

    `known`: the run as the attempt read it before it ran (consumed: it is folded
    forward), tried first without reading the run again. Versions are dense, so the
    append after its version succeeds only when nothing was appended since, when it is
    the current state; otherwise the version is taken, nothing is written, and the run
    is read again, as without it (`_APPEND_TRIES` reads).

    The outcomes of one run queue on its lock (`lock_answers`, with its callback
    answers) first: a parallel's tasks ending at once on many workers would otherwise
    keep taking each other's next version, and an outcome that lost every try was
    taken for a run that moved on, its result dropped and the parallel left waiting for
    it. Under the lock only a pass, a cancel or an operator can take the version, rare
    while the run waits for its tasks; an outcome that still loses every try raises,
    writing nothing (the attempt's lease then decides), never taking the run for moved
    on.

    Raises:
        TransientStoreError: other writers took the run's next version on every try
            (`known`, then `_APPEND_TRIES` reads) while the run still waited for this
            task.
    """
    store.streams.lock_answers(task.tenant_id, task.run_id)
    guesses: list[RunState | None] = [known] if known is not None else []
    for state in [*guesses, *[None] * _APPEND_TRIES]:
        if state is None:
            state = load_run_for_pass(store, task.tenant_id, task.run_id, tail=True).state
        if not state.waits_for_task(task.task_id):
            return None
        fact = build(state.suspension_version)
        state.apply(RecordedFact(state.version + 1, now, fact))
        due = state.outcome_ready
        if isinstance(fact, (TaskCompleted, TaskFailed)) and not due:
            fact = replace(fact, run_due=False)  # the projection marks the row due or not
        stopped = state.parallel_stop() if due else None
        facts: list[TaskFact | StepStopped] = [fact] if stopped is None else [fact, stopped]
        if store.streams.append(
            task.tenant_id, task.run_id, RUN_STREAM, state.version - 1, facts, now
        ):
            if stopped is not None:
                _cancel_stopped(store, task, state, stopped, now)
            return state.suspension_version, due
    raise TransientStoreError(
        f"task {task.task_key!r} of run {task.run_id}: other writers took the run's next"
        f" version on every try ({len(guesses) + _APPEND_TRIES}); its outcome was not recorded"
    )


def _cancel_stopped(
    store: Store, task: ClaimedTask, state: RunState, stopped: StepStopped, now: datetime
) -> None:
    """Cancel the rows of the tasks a parallel's stop ended: never claimed again."""
    open_ = state.suspension
    assert isinstance(open_, TasksScheduled)
    for other in open_.tasks:
        if other.task_key in stopped.task_keys:
            store.tasks.settle(task.tenant_id, other.task_id, "cancelled", now)


def record_success(
    store: Store, task: ClaimedTask, value: Any, now: datetime, known: RunState | None = None
) -> tuple[Literal["completed", "dropped"], bool]:
    """Record a completed attempt (`known`: the run as read before the attempt, see
    `_append`)."""

    def completed(version: int) -> TaskCompleted:
        return TaskCompleted(
            task_key=task.task_key,
            task_id=task.task_id,
            suspension_version=version,
            attempt=task.attempt,
            result=value,
        )

    with store.transaction():
        appended = _append(store, task, completed, now, known)
        with store.pipeline():
            if appended is None:
                store.tasks.settle(task.tenant_id, task.task_id, "cancelled", now)
            else:
                version, due = appended
                store.tasks.settle(task.tenant_id, task.task_id, "completed", now)
                if due:
                    store.pending.mark_matched(
                        task.tenant_id, task.run_id, version, TASK_OUTCOME, task.task_id, now
                    )
            release_task_slots(store, task, now)  # last: see its docstring
    if appended is None:
        return "dropped", False
    return "completed", due


def record_failure(
    store: Store,
    task: ClaimedTask,
    attempt: int,
    failure: AttemptFailure,
    policy: RetryPolicy,
    now: datetime,
    rng: random.Random,
    attempt_running: bool = False,
    known: RunState | None = None,
) -> tuple[Literal["failed", "retry", "dropped"], bool]:
    """Record a failed attempt: a TaskAttemptFailed and when the next attempt runs, or
    the TaskFailed that ends the task. `attempt_running`: the next attempt has already
    been claimed (a lost attempt found by a claim), so none is scheduled; a lost
    attempt recorded without it (at most once) gives the claim back, due after the
    backoff."""
    final = failure.final or attempt >= task.max_attempts
    error = f"workflow step failed ({failure.error_class})"
    retry_at = (
        now if attempt_running else now + timedelta(seconds=policy.delay(attempt, rng.random))
    )

    def fact(version: int) -> TaskFact:
        if final:
            return TaskFailed(
                task_key=task.task_key,
                task_id=task.task_id,
                suspension_version=version,
                attempts=attempt,
                error=error,
                error_class=failure.error_class,
                reason=failure.reason
                if failure.final or failure.keeps_reason
                else "attempts_exhausted",
                status=failure.status,
            )
        return TaskAttemptFailed(
            task_key=task.task_key,
            task_id=task.task_id,
            suspension_version=version,
            attempt=attempt,
            error=error,
            error_class=failure.error_class,
            retry_at=retry_at,
            status=failure.status,
        )

    with store.transaction():
        appended = _append(store, task, fact, now, known)
        with store.pipeline():
            if appended is None:
                store.tasks.settle(task.tenant_id, task.task_id, "cancelled", now)
            elif final:
                version, due = appended
                store.tasks.settle(task.tenant_id, task.task_id, "failed", now, error)
                if due:
                    store.pending.mark_matched(
                        task.tenant_id, task.run_id, version, TASK_OUTCOME, task.task_id, now
                    )
            elif attempt < task.attempt:
                store.tasks.release(task, retry_at, error)  # the claim that found it, unstarted
            elif not attempt_running:
                store.tasks.retry(task, retry_at, error)
            if not attempt_running:
                release_task_slots(store, task, now)  # last: see its docstring
    if appended is None:
        return "dropped", False
    if final:
        return "failed", due
    return "retry", False
