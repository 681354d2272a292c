"""The task worker: run one attempt of a due task outside any transaction and record
its outcome on the run stream; the run then resumes at once.

A claim leases a `task_queue` row for the attempt's timeout plus a margin. The attempt
runs with a ctx rebuilt from what the pass stored (trigger event, results, the
for_each scope) and `ctx.workflow.retry_attempt` / `task_key` set. Its outcome is
appended to the run stream at the stream's current version after checking, in the
same transaction, that the run still waits at this task without an outcome: the
append is what makes an attempt count once when two workers ran it (a lease that ran
out). A final outcome also marks the run's pending row due, and the caller enqueues
the resume after commit.

Guarantees: at least once per attempt (a worker that dies mid-attempt leaves a
`running` row whose lease ends; the next claim records that attempt as failed,
TaskLeaseExpired, and goes on), except mail, which is never sent twice: a mail task
whose send was cut off ends ambiguous, and a task whose RetryPolicy says
`at_most_once`: its interrupted attempt is recorded as failed with TaskInterrupted
(reason task_interrupted), judged by the policy like any error, and another attempt
follows only after its backoff, if the policy allows one (the claim that found it is
given back unstarted).

A parallel's outcome that makes its run due while other tasks of it have none stops
them in the same transaction (a `workflow.step.stopped` fact, their rows cancelled):
they never run again, and an attempt of one still running finishes unheard (its
outcome is dropped, as for a cancelled run).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from ..definition import (
    MailSend,
    RetryPolicy,
    StepContext,
    Task,
    TaskInterrupted,
    WebhookSend,
    WorkflowInfo,
    WorkflowRegistry,
)
from ..definition.branches import branch_context, is_branch_name
from ..pass_result import WorkflowStepError
from ..ports import HttpSender, Mailer
from ..redaction import exception_for_log
from ..step_paths import step_at
from ..storable import DEFAULT_MAX_RESULT_BYTES, NotStorable, check_storable
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
from ..webhook_guard import WebhookGuard
from .delivery import DeliveryFailed, deliver_mail, deliver_webhook
from .passes import LoadedRun, load_run_for_pass, trigger_event
from .pinning import serving_definition
from .projection import TASK_OUTCOME
from .timeouts import TaskTimeout, call_with_timeout

log = logging.getLogger("workflow_runner.tasks")

# The time a delivery task's call may take when the step names no timeout (seconds).
DELIVERY_TIMEOUT_MS = 10_000
# A delivery task whose step names no RetryPolicy: as the dispatcher retries.
DELIVERY_POLICY = RetryPolicy(max_attempts=5, base="PT30S", cap="PT1H", jitter="equal")
# Kept beyond an attempt's timeout for recording its outcome (lease and budget).
LEASE_MARGIN_SECONDS = 5.0
_APPEND_TRIES = 5


@dataclass(frozen=True)
class TaskPorts:
    """What task attempts reach: the registry (for the functions) and the delivery ports."""

    registry: WorkflowRegistry
    mailer: Mailer
    http: HttpSender
    guard: WebhookGuard
    mail_sender: str | None = None
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES


@dataclass(frozen=True)
class TaskAttemptResult:
    """What one claim did: `completed`/`failed` (final; the run is due), `retry`, or
    `dropped` (the run no longer waits for this task)."""

    tenant_id: str
    run_id: str
    task_id: str
    task_key: str
    step_kind: str
    attempt: int
    outcome: Literal["completed", "failed", "retry", "dropped"]
    error_class: str | None = None
    reason: str | None = None
    step_index: int = 0
    run_due: bool = False  # the run may resume now (its last awaited outcome is in)


# Why an at-most-once task ended whose last attempt was interrupted.
TASK_INTERRUPTED = "task_interrupted"


class _Failure(Exception):
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


def run_task(
    store: Store,
    ports: TaskPorts,
    now: Callable[[], datetime],
    seconds_left: Callable[[], float],
    rng: random.Random | None = None,
) -> TaskAttemptResult | None:
    """Claim the oldest due task whose attempt fits in the time left and run it.

    Returns None when no task fits (nothing due, or the time is short).
    """
    rng = rng or random.Random()
    left_ms = int((seconds_left() - LEASE_MARGIN_SECONDS) * 1000)
    if left_ms < 1000:
        return None
    with store.transaction():
        task = store.tasks.claim(now(), left_ms, DELIVERY_TIMEOUT_MS, LEASE_MARGIN_SECONDS)
    if task is None:
        return None
    run = load_run_for_pass(store, task.tenant_id, task.run_id, tail=True)
    if not run.state.waits_for_task(task.task_id):
        store.tasks.settle(task.tenant_id, task.task_id, "cancelled", now())
        return _result(task, "dropped", False)
    step = _step_of(store, ports, task)
    policy = _policy_of(step)
    if task.lost_attempt:
        # The previous attempt's worker died: that attempt failed. At most once: this
        # claim is given back (the next attempt, if any, after the backoff).
        lost = _lost_attempt(task, policy)
        at_most_once = lost.error_class == TaskInterrupted.__name__
        outcome, due = _record_failure(
            store, task, task.attempt - 1, lost, policy, now(), rng, not at_most_once
        )
        if outcome != "retry" or at_most_once:
            return _result(task, outcome, due, lost, attempt=task.attempt - 1)
    try:
        value = _attempt(store, ports, task, run, step, seconds_left, now())
        check_storable(value, f"the result of task {task.task_key!r}", ports.max_result_bytes)
    except _Failure as failure:
        outcome, due = _record_failure(store, task, task.attempt, failure, policy, now(), rng)
        return _result(task, outcome, due, failure)
    except NotStorable:
        unstorable = _Failure("ResultNotStorable", True, "result_not_storable")
        outcome, due = _record_failure(store, task, task.attempt, unstorable, policy, now(), rng)
        return _result(task, outcome, due, unstorable)
    success, due = _record_success(store, task, value, now())
    return _result(task, success, due)


def _step_of(
    store: Store, ports: TaskPorts, task: ClaimedTask
) -> Task | MailSend | WebhookSend | None:
    """The step a task runs, on the definition its run is pinned to, or on the one its
    run would resume on, whose shape agrees (engine/pinning.py; None: neither)."""
    definition = ports.registry.find(task.workflow_name, task.definition_fingerprint)
    if definition is None:
        definition = serving_definition(
            store, ports.registry, task.workflow_name, task.definition_fingerprint, task.path
        ).definition
    if definition is None:
        return None
    try:
        step = step_at(definition.steps, task.path)
    except WorkflowStepError:
        return None
    return step if isinstance(step, (Task, MailSend, WebhookSend)) else None


def _policy_of(step: Task | MailSend | WebhookSend | None) -> RetryPolicy:
    if isinstance(step, Task):
        return step.retry
    if step is not None and step.retry is not None:
        return step.retry
    return DELIVERY_POLICY


def _lost_attempt(task: ClaimedTask, policy: RetryPolicy) -> _Failure:
    if task.step_kind == "mail.send":
        # The mail may have left before the worker died; never send it twice.
        return _Failure("MailDeliveryAmbiguous", True, "ambiguous")
    if policy.at_most_once:
        # It may have done its work: the policy judges it, as an error it raised.
        final = not policy.retries(TaskInterrupted())
        return _Failure(TaskInterrupted.__name__, final, TASK_INTERRUPTED, keeps_reason=True)
    return _Failure("TaskLeaseExpired", False, "attempts_exhausted")


def _attempt(
    store: Store,
    ports: TaskPorts,
    task: ClaimedTask,
    run: LoadedRun,
    step: Task | MailSend | WebhookSend | None,
    seconds_left: Callable[[], float],
    now: datetime,
) -> Any:
    """One attempt; its JSON result, or _Failure."""
    if step is None:
        raise _Failure("WorkflowDefinitionChanged", True, "workflow_definition_changed")
    timeout = (task.timeout_ms or DELIVERY_TIMEOUT_MS) / 1000
    timeout = max(0.001, min(timeout, seconds_left() - LEASE_MARGIN_SECONDS))
    if isinstance(step, Task):
        return _run_function(store, task, run, step, timeout, now)
    request = task.request or {}
    try:
        if task.step_kind == "mail.send":
            message_id = deliver_mail(request, task.task_id, ports.mailer, ports.mail_sender)
            return {"messageId": message_id}
        reply = deliver_webhook(request, task.task_id, ports.http, ports.guard, timeout)
        return {"status": reply.status, "body": reply.body}
    except DeliveryFailed as failure:
        final = failure.kind != "transient"
        reason = {"refused": "refused", "ambiguous": "ambiguous"}.get(failure.kind, "rejected")
        raise _Failure(failure.error_class, final, reason, failure.status) from failure


def _run_function(
    store: Store, task: ClaimedTask, run: LoadedRun, step: Task, timeout: float, now: datetime
) -> Any:
    trigger = trigger_event(store, run)
    if trigger is None:
        raise _Failure("TriggerEventUnavailable", True, "trigger_event_unavailable")
    stored = store.results.of_run(task.tenant_id, task.run_id)
    steps = dict(stored.values)
    if is_branch_name(task.workflow_name):
        # A parallel's branch sees its parent's event and results (its own over them).
        trigger, steps = branch_context(trigger, steps)
    ctx = StepContext(
        event=trigger,
        steps=steps,
        scope=dict(task.scope),
        workflow=WorkflowInfo(
            run_id=task.run_id,
            workflow_name=task.workflow_name,
            step_index=int(task.path[0]["i"]),
            retry_attempt=task.attempt,
            definition_fingerprint=task.definition_fingerprint,
            task_key=task.task_id,
            parent_run_id=run.state.started.parent_run_id if run.state.started else None,
            map_index=run.state.started.map_index if run.state.started else None,
        ),
        now=now,
    )
    try:
        return call_with_timeout(lambda: step.fn(ctx), timeout)
    except TaskTimeout as error:
        raise _Failure("TaskTimeout", False, "attempts_exhausted") from error
    except Exception as error:
        log.warning(
            "task attempt failed",
            extra={
                "run_id": task.run_id,
                "task": task.task_key,
                "attempt": task.attempt,
                "detail": exception_for_log(error),
            },
        )
        final = not step.retry.retries(error)
        reason = "non_retryable" if final else "attempts_exhausted"
        raise _Failure(type(error).__name__, final, reason) from error


TaskFact = TaskAttemptFailed | TaskCompleted | TaskFailed


def _append(
    store: Store, task: ClaimedTask, build: Callable[[int], TaskFact], now: datetime
) -> tuple[int, bool] | None:
    """Append a task fact at the run stream's current version, in the caller's
    transaction, while the run still waits at this task without an outcome. Returns
    the suspension's version and whether the run is now due (every task of a parallel
    settled, or one failed uncaught, or its completion policy decided: then the tasks
    left are stopped), or None when the run moved on (cancelled, stopped, or another
    worker recorded the outcome first). `build` makes the fact for a version."""
    for _ in range(_APPEND_TRIES):
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
    return None


def _cancel_stopped(
    store: Store, task: ClaimedTask, state: RunState, stopped: StepStopped, now: datetime
) -> None:
    """Cancel the rows of the tasks a parallel's stop ended: never claimed again."""
    open_ = state.suspension
    assert isinstance(open_, TasksScheduled)
    for other in open_.tasks:
        if other.task_key in stopped.task_keys:
            store.tasks.settle(task.tenant_id, other.task_id, "cancelled", now)


def _record_success(
    store: Store, task: ClaimedTask, value: Any, now: datetime
) -> tuple[Literal["completed", "dropped"], bool]:
    def completed(version: int) -> TaskCompleted:
        return TaskCompleted(
            task_key=task.task_key,
            task_id=task.task_id,
            suspension_version=version,
            attempt=task.attempt,
            result=value,
        )

    with store.transaction():
        appended = _append(store, task, completed, now)
        if appended is None:
            store.tasks.settle(task.tenant_id, task.task_id, "cancelled", now)
            return "dropped", False
        version, due = appended
        store.tasks.settle(task.tenant_id, task.task_id, "completed", now)
        if due:
            store.pending.mark_matched(
                task.tenant_id, task.run_id, version, TASK_OUTCOME, task.task_id, now
            )
    return "completed", due


def _record_failure(
    store: Store,
    task: ClaimedTask,
    attempt: int,
    failure: _Failure,
    policy: RetryPolicy,
    now: datetime,
    rng: random.Random,
    attempt_running: bool = False,
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
        appended = _append(store, task, fact, now)
        if appended is None:
            store.tasks.settle(task.tenant_id, task.task_id, "cancelled", now)
            return "dropped", False
        version, due = appended
        if final:
            store.tasks.settle(task.tenant_id, task.task_id, "failed", now, error)
            if due:
                store.pending.mark_matched(
                    task.tenant_id, task.run_id, version, TASK_OUTCOME, task.task_id, now
                )
            return "failed", due
        if attempt < task.attempt:
            store.tasks.release(task, retry_at, error)  # the claim that found it, unstarted
        elif not attempt_running:
            store.tasks.retry(task, retry_at, error)
    return "retry", False


def _result(
    task: ClaimedTask,
    outcome: Literal["completed", "failed", "retry", "dropped"],
    run_due: bool,
    failure: _Failure | None = None,
    attempt: int | None = None,
) -> TaskAttemptResult:
    return TaskAttemptResult(
        tenant_id=task.tenant_id,
        run_id=task.run_id,
        task_id=task.task_id,
        task_key=task.task_key,
        step_kind=task.step_kind,
        attempt=task.attempt if attempt is None else attempt,
        outcome=outcome,
        error_class=failure.error_class if failure else None,
        reason=failure.reason if failure else None,
        step_index=int(task.path[0]["i"]),
        run_due=run_due,
    )
