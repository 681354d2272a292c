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

A task whose run's definition only kept code has (definition/hosts.py) is handed, claim and
all, to the StepDispatcher version that has it: that version runs exactly that attempt
under the lease taken here (`run_forwarded_task`), bounded by it; if it dies or does not
answer, the lease ends and the next claim counts the attempt as lost. A kept version
that is gone fails the run loud (workflow_definition_changed).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal, Protocol

from ..callback_tokens import callback_base_url
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
from ..definition.hosts import REGISTERED_HOSTS, STEP_DISPATCHER, DefinitionHosts
from ..errors import ForwardFailed, HostGone, WorkflowRunnerError
from ..flow.constructs import FlowControl
from ..flow.tasks import claim_within_limits, release_task_slots
from ..interpreter.callback_view import created_links
from ..pass_result import WorkflowStepError
from ..ports import HttpSender, Mailer
from ..redaction import exception_for_log
from ..step_paths import step_at
from ..storable import DEFAULT_MAX_RESULT_BYTES, NotStorable, check_storable
from ..store import ClaimedTask, Store
from ..webhook_guard import WebhookGuard
from .callback_passes import known_callbacks
from .delivery import DeliveryFailed, deliver_mail, deliver_webhook
from .passes import LoadedRun, batch_events, load_run_for_pass, trigger_event
from .persist import fail_run
from .pinning import serving_definition
from .task_outcomes import AttemptFailure, record_failure, record_success
from .timeouts import TaskTimeout, call_with_timeout

log = logging.getLogger("workflow_runner.tasks")

# The time a delivery task's call may take when the step names no timeout (seconds).
DELIVERY_TIMEOUT_MS = 10_000
# A delivery task whose step names no RetryPolicy: as the dispatcher retries.
DELIVERY_POLICY = RetryPolicy(max_attempts=5, base="PT30S", cap="PT1H", jitter="equal")
# Kept beyond an attempt's timeout for recording its outcome (lease and budget).
LEASE_MARGIN_SECONDS = 5.0


class TaskForwarder(Protocol):
    """Hands a claimed task to the kept version of StepDispatcher that has its run's
    definition and waits for its answer (aws/versions.py: a Lambda invoke).

    Raises:
        HostGone: that version no longer exists.
        ForwardFailed: it did not answer.
    """

    def run_task(self, host: str, task: ClaimedTask) -> TaskAttemptResult | None:
        """Run the attempt on `host` under the caller's lease; its result, or None when
        the claim no longer held there (the lease ended, or the outcome is recorded)."""
        ...


@dataclass(frozen=True)
class TaskPorts:
    """What task attempts reach: the registry (for the functions), the delivery ports,
    and kept code: where definitions gone from the registry still run (`hosts`) and how
    a task is handed there (`forwarder`; None: kept code that is not loaded here is not
    used)."""

    registry: WorkflowRegistry
    mailer: Mailer
    http: HttpSender
    guard: WebhookGuard
    mail_sender: str | None = None
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    hosts: DefinitionHosts | None = REGISTERED_HOSTS
    forwarder: TaskForwarder | None = None


TaskOutcome = Literal["completed", "failed", "retry", "dropped", "unanswered"]


@dataclass(frozen=True)
class TaskAttemptResult:
    """What one claim did: `completed`/`failed` (final; the run is due), `retry`, or
    `dropped` (the run no longer waits for this task), or `unanswered` (it was handed to
    a kept version that did not answer: its lease decides); `kept_on`: the kept version
    that ran it."""

    tenant_id: str
    run_id: str
    task_id: str
    task_key: str
    step_kind: str
    attempt: int
    outcome: TaskOutcome
    error_class: str | None = None
    reason: str | None = None
    step_index: int = 0
    run_due: bool = False  # the run may resume now (its last awaited outcome is in)
    kept_on: str | None = None


# Why an at-most-once task ended whose last attempt was interrupted.
TASK_INTERRUPTED = "task_interrupted"


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
    # One transaction leases the task and whatever its limits say (flow/tasks.py).
    task = claim_within_limits(
        store,
        lambda: store.tasks.claim(now(), left_ms, DELIVERY_TIMEOUT_MS, LEASE_MARGIN_SECONDS),
        now,
    )
    if task is None:
        return None
    return _run_claimed(store, ports, task, now, seconds_left, rng)


def run_forwarded_task(
    store: Store,
    ports: TaskPorts,
    tenant_id: str,
    task_id: str,
    attempt: int,
    lost_attempt: bool,
    forwarded_from: str,
    now: Callable[[], datetime],
    seconds_left: Callable[[], float],
    rng: random.Random | None = None,
) -> TaskAttemptResult | None:
    """Run attempt `attempt` of a task another version claimed and handed here as the
    kept code of its run's definition, under that claim's lease (never handed on).

    Returns None when the claim no longer holds (its lease ended, or the attempt's
    outcome is recorded): nothing is run.
    """
    task = store.tasks.adopt(tenant_id, task_id, attempt, now())
    if task is None:
        return None
    task = replace(task, lost_attempt=lost_attempt)

    def within_lease() -> float:
        return min(seconds_left(), (task.leased_until - now()).total_seconds())

    log.info("running a task handed here", extra={"task": task_id, "from": forwarded_from})
    return _run_claimed(
        store, ports, task, now, within_lease, rng or random.Random(), forwarded=True
    )


def _run_claimed(
    store: Store,
    ports: TaskPorts,
    task: ClaimedTask,
    now: Callable[[], datetime],
    seconds_left: Callable[[], float],
    rng: random.Random,
    forwarded: bool = False,
) -> TaskAttemptResult:
    """The attempt of a claimed task (see the module's docstring)."""
    run = load_run_for_pass(store, task.tenant_id, task.run_id, tail=True)
    if not run.state.waits_for_task(task.task_id):
        with store.transaction():
            store.tasks.settle(task.tenant_id, task.task_id, "cancelled", now())
            release_task_slots(store, task, now())
        return _result(task, "dropped", False)
    step, host = _step_of(store, ports, task, forwarded)
    if host is not None:
        return _hand_to_kept(store, ports, task, host, now())
    policy = _policy_of(step)
    # The run as read above, for the outcome's append to try first: nothing else of this
    # attempt writes to the stream before it, but a lost attempt's failure does.
    known = None if task.lost_attempt else run.state
    if task.lost_attempt:
        # The previous attempt's worker died: that attempt failed. At most once: this
        # claim is given back (the next attempt, if any, after the backoff).
        lost = _lost_attempt(task, policy)
        at_most_once = lost.error_class == TaskInterrupted.__name__
        outcome, due = record_failure(
            store, task, task.attempt - 1, lost, policy, now(), rng, not at_most_once
        )
        if outcome != "retry" or at_most_once:
            return _result(task, outcome, due, lost, attempt=task.attempt - 1)
    try:
        value = _attempt(store, ports, task, run, step, seconds_left, now())
        check_storable(value, f"the result of task {task.task_key!r}", ports.max_result_bytes)
    except AttemptFailure as failure:
        outcome, due = record_failure(
            store, task, task.attempt, failure, policy, now(), rng, known=known
        )
        return _result(task, outcome, due, failure)
    except NotStorable as error:
        # Which key, where inside the value, what type: the text may quote the value's
        # keys, so it follows the redaction policy like an exception's.
        log.warning(
            "task result not storable",
            extra={**_log_context(task), "detail": exception_for_log(error)},
        )
        unstorable = AttemptFailure("ResultNotStorable", True, "result_not_storable")
        outcome, due = record_failure(
            store, task, task.attempt, unstorable, policy, now(), rng, known=known
        )
        return _result(task, outcome, due, unstorable)
    success, due = record_success(store, task, value, now(), known)
    return _result(task, success, due)


Step = Task | MailSend | WebhookSend


def _log_context(task: ClaimedTask) -> dict[str, object]:
    """What a log line about an attempt carries: its tenant, run, task and attempt."""
    return {
        "tenant_id": task.tenant_id,
        "run_id": task.run_id,
        "task": task.task_key,
        "attempt": task.attempt,
    }


def _step_of(
    store: Store, ports: TaskPorts, task: ClaimedTask, forwarded: bool = False
) -> tuple[Step | None, str | None]:
    """The step a task runs, on the definition its run is pinned to, on the one its run
    would resume on, whose shape agrees, or on kept code loaded here (engine/pinning.py;
    None: none of them) — or, second, the kept version to hand it to. A task handed
    here (`forwarded`) is never handed on."""
    definition = ports.registry.find(task.workflow_name, task.definition_fingerprint)
    if definition is None:
        serving = serving_definition(
            store,
            ports.registry,
            task.workflow_name,
            task.definition_fingerprint,
            task.path,
            None if forwarded else ports.hosts,
            STEP_DISPATCHER,
        )
        if serving.how == "kept" and serving.definition is None and ports.forwarder is not None:
            return None, serving.host
        definition = serving.definition
    if definition is None:
        return None, None
    try:
        step = step_at(definition.steps, task.path)
    except WorkflowStepError:
        return None, None
    return (step if isinstance(step, (Task, MailSend, WebhookSend)) else None), None


def _hand_to_kept(
    store: Store, ports: TaskPorts, task: ClaimedTask, host: str, now: datetime
) -> TaskAttemptResult:
    """Hand the claimed attempt to the kept version `host`; one that is gone is forgotten
    and the next older one tried, and when none is left the run fails loud."""
    assert ports.forwarder is not None
    tried: set[str] = set()
    while True:
        try:
            answered = ports.forwarder.run_task(host, task)
        except HostGone:
            log.warning("kept version is gone", extra={"run_id": task.run_id, "host": host})
            store.hosts.forget(host)
            tried.add(host)
            _, again = _step_of(store, ports, task)
            if again is None or again in tried:
                return _fail_run_kept_gone(store, task, host, now)
            host = again
            continue
        except ForwardFailed as error:
            log.warning(
                "kept version did not answer; the task's lease decides",
                extra={"run_id": task.run_id, "host": host, "detail": str(error)},
            )
            return replace(_result(task, "unanswered", False), kept_on=host)
        if answered is None:
            return replace(_result(task, "unanswered", False), kept_on=host)
        return replace(answered, kept_on=host)


def _fail_run_kept_gone(
    store: Store, task: ClaimedTask, host: str, now: datetime
) -> TaskAttemptResult:
    """No kept version has the task's definition any more: the run fails loud."""
    reason = "workflow_definition_changed"
    with store.transaction():
        state = load_run_for_pass(store, task.tenant_id, task.run_id, tail=True).state
        if not state.waits_for_task(task.task_id):
            store.tasks.settle(task.tenant_id, task.task_id, "cancelled", now)
            return _result(task, "dropped", False)
        step_index = int(task.path[0]["i"])
        error = (
            f'Workflow "{task.workflow_name}" definition changed since run {task.run_id} '
            f"started (expected {task.definition_fingerprint[:12]}…) and its kept version "
            f"{host} is gone: task {task.task_key!r} has no code to run."
        )
        store.tasks.settle(task.tenant_id, task.task_id, "failed", now, reason)
        if not fail_run(store, state, state.version, step_index, reason, error, now):
            return _result(task, "dropped", False)
    failure = AttemptFailure("WorkflowDefinitionChanged", True, reason)
    return _result(task, "failed", False, failure)


def _policy_of(step: Step | None) -> RetryPolicy:
    if isinstance(step, Task):
        return step.retry
    if step is not None and step.retry is not None:
        return step.retry
    return DELIVERY_POLICY


def _lost_attempt(task: ClaimedTask, policy: RetryPolicy) -> AttemptFailure:
    if task.step_kind == "mail.send":
        # The mail may have left before the worker died; never send it twice.
        return AttemptFailure("MailDeliveryAmbiguous", True, "ambiguous")
    if policy.at_most_once:
        # It may have done its work: the policy judges it, as an error it raised.
        final = not policy.retries(TaskInterrupted())
        return AttemptFailure(TaskInterrupted.__name__, final, TASK_INTERRUPTED, keeps_reason=True)
    return AttemptFailure("TaskLeaseExpired", False, "attempts_exhausted")


def _attempt(
    store: Store,
    ports: TaskPorts,
    task: ClaimedTask,
    run: LoadedRun,
    step: Step | None,
    seconds_left: Callable[[], float],
    now: datetime,
) -> Any:
    """One attempt; its JSON result, or AttemptFailure."""
    if step is None:
        raise AttemptFailure("WorkflowDefinitionChanged", True, "workflow_definition_changed")
    timeout = (task.timeout_ms or DELIVERY_TIMEOUT_MS) / 1000
    timeout = max(0.001, min(timeout, seconds_left() - LEASE_MARGIN_SECONDS))
    if isinstance(step, Task):
        return _run_function(store, task, run, step, timeout, now, _flow_of(ports, task))
    request = task.request or {}
    context = _log_context(task)
    try:
        if task.step_kind == "mail.send":
            sender = ports.mail_sender
            message_id = deliver_mail(request, task.task_id, ports.mailer, sender, context)
            return {"messageId": message_id}
        reply = deliver_webhook(request, task.task_id, ports.http, ports.guard, timeout, context)
        return {"status": reply.status, "body": reply.body}
    except DeliveryFailed as failure:
        final = failure.kind != "transient"
        reason = {"refused": "refused", "ambiguous": "ambiguous"}.get(failure.kind, "rejected")
        raise AttemptFailure(failure.error_class, final, reason, failure.status) from failure


def _flow_of(ports: TaskPorts, task: ClaimedTask) -> FlowControl | None:
    """The flow control of the task's workflow: whether it gathers its triggers in
    batches (ctx.events) or starts with a debounce's last trigger (ctx.event)."""
    try:
        return ports.registry.latest(task.workflow_name).flow
    except WorkflowRunnerError:
        return None


def _run_function(
    store: Store,
    task: ClaimedTask,
    run: LoadedRun,
    step: Task,
    timeout: float,
    now: datetime,
    flow: FlowControl | None = None,
) -> Any:
    trigger = trigger_event(store, run, flow is not None and flow.debounce is not None)
    batch = batch_events(store, run.state, flow is not None and flow.batch is not None)
    if trigger is None or batch is None:
        raise AttemptFailure("TriggerEventUnavailable", True, "trigger_event_unavailable")
    stored = store.results.of_run(task.tenant_id, task.run_id)
    steps = dict(stored.values)
    if is_branch_name(task.workflow_name):
        # A parallel's branch sees its parent's event and results (its own over them).
        trigger, steps = branch_context(trigger, steps)
    # The run's created callbacks, read before the function runs (outside any pass).
    secret = run.state.started.callback_secret if run.state.started else None
    known = known_callbacks(store, task.tenant_id, task.run_id) if secret else []
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
        callbacks=created_links(secret, callback_base_url(), known),
        batch_events=batch,
    )
    try:
        return call_with_timeout(lambda: step.fn(ctx), timeout)
    except TaskTimeout as error:
        raise AttemptFailure("TaskTimeout", False, "attempts_exhausted") from error
    except Exception as error:
        log.warning(
            "task attempt failed", extra={**_log_context(task), "detail": exception_for_log(error)}
        )
        final = not step.retry.retries(error)
        reason = "non_retryable" if final else "attempts_exhausted"
        raise AttemptFailure(type(error).__name__, final, reason) from error


def _result(
    task: ClaimedTask,
    outcome: TaskOutcome,
    run_due: bool,
    failure: AttemptFailure | None = None,
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
