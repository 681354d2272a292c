"""What every Lambda handler shares: telemetry, runtime access, input parsing and the
small pieces of glue between an engine result and its metrics.

Handlers in ``functions/<name>/app.py`` stay thin: parse the input with the models
here, make one engine call, report. Nothing in this module reads the environment at
import time; settings, the registry and the runtime are built on first use.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes import SQSEvent
from aws_lambda_powertools.utilities.parser import parse
from pydantic import BaseModel, ValidationError

from .. import heap, redaction
from ..callback_tokens import callback_links
from ..definition import DomainEvent, WorkflowRegistry, load_workflow_modules
from ..definition.hosts import REGISTERED_HOSTS, DefinitionHosts, Role, register_hosts
from ..engine.passes import RunOutcome
from ..engine.purge import PurgeResult
from ..engine.resume import ResumeRequestItem, ResumeResult
from ..engine.resume_batch import Hold
from ..engine.resume_batch import resume_batch as engine_resume_batch
from ..engine.tasks import TaskPorts, run_forwarded_task
from ..engine.worker import WorkResult
from ..envelope import MAX_EVENT_BYTES, EventBridgeEvent, parse_envelope, to_domain_event
from ..errors import InvalidInput, RunNotFound, TransientStoreError
from ..json_input import check_json_value, parse_json
from ..ports import Runtime, get_runtime
from ..settings import Settings, get_settings
from ..store import Store
from ..webhook_guard import WebhookGuard
from . import runtime as aws_runtime
from . import versions
from .models import ForwardedTask, ResumeMessage

logger = Logger(service="workflow-runner")
metrics = Metrics(namespace="WorkflowRunner", service="workflow-runner")
tracer = Tracer(service="workflow-runner")

aws_runtime.install()  # registers the factory only; nothing is built before first use

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

# The most a function's input may be as JSON: what AWS carries in an EventBridge event,
# an SQS message or an asynchronous invoke (256 KB); a resume request is ~130 bytes.
MAX_INPUT_BYTES = MAX_EVENT_BYTES

_registry: WorkflowRegistry | None = None
_heap_settled = False
_hosting: set[Role] = set()


def runtime() -> Runtime:
    """The installed runtime (AWS in Lambda; the in-process one in tests and locally)."""
    return get_runtime()


def settings() -> Settings:
    """The runtime's settings, or the environment's."""
    configured = runtime().settings
    return configured if configured is not None else get_settings()


def registry() -> WorkflowRegistry:
    """The workflow registry, filled from WORKFLOW_MODULES on first use."""
    global _registry
    override = runtime().registry
    if override is not None:
        return override
    if _registry is None:
        _registry = load_workflow_modules({"WORKFLOW_MODULES": settings().workflow_modules})
    return _registry


def host_definitions(role: Role, context: Any) -> None:
    """Register, once per container, that the function version it runs has the registry's
    definitions (definition/hosts.py): ResumeRun and StepDispatcher call it first thing, so a
    later deploy can hand this version the runs whose definitions it changed. `$LATEST`
    (not a published version: `sam local`, tests) registers nothing."""
    if role in _hosting:
        return
    arn = versions.qualified_arn(
        str(getattr(context, "invoked_function_arn", "")),
        str(getattr(context, "function_version", "")),
    )
    versions.remember_own_arn(arn)
    if arn is not None:
        now = runtime().clock.now()
        with_store(lambda store: register_hosts(store, registry(), role, arn, now))
        logger.info("registered as kept code", extra={"function_arn": arn, "role": role})
    _hosting.add(role)


def task_ports() -> TaskPorts:
    """What StepDispatcher's task attempts reach (registry, delivery and kept code)."""
    rt, cfg = runtime(), settings()
    return TaskPorts(
        registry=registry(),
        mailer=rt.mailer,
        http=rt.http,
        guard=rt.webhook_guard or WebhookGuard(cfg.webhook_allow_hosts),
        mail_sender=cfg.mail_sender,
        hosts=kept_hosts(),
        forwarder=forwarder(),
    )


def forwarder() -> versions.KeptVersionForwarder | None:
    """How this version hands a run's work to the kept version that has its definition
    (None: the runtime cannot invoke other versions, e.g. locally)."""
    invoker = runtime().invoker
    return versions.KeptVersionForwarder(invoker) if invoker is not None else None


def kept_hosts() -> DefinitionHosts | None:
    """Where kept code is found: the runtime's own (the local archive), else the function
    versions registered in the database — only when this runtime can hand work to them
    (else a run that needs them would be answered and left waiting: it fails loud)."""
    rt = runtime()
    if rt.definition_hosts is not None:
        return rt.definition_hosts
    return REGISTERED_HOSTS if rt.invoker is not None else None


def run_task_handed_here(
    message: ForwardedTask, seconds_left: Callable[[], float]
) -> dict[str, Any]:
    """StepDispatcher's input from another version that handed it a claimed task as the
    kept code of its run's definition: run that attempt under its lease (never handed
    on) and answer with its result (aws/versions.py); the caller enqueues the run's
    resume, as for an attempt of its own."""
    handed = message.forwarded_task
    rt = runtime()
    result = with_store(
        lambda store: run_forwarded_task(
            store,
            task_ports(),
            handed.tenant_id,
            handed.task_id,
            handed.attempt,
            handed.lost_attempt,
            handed.forwarded_from,
            rt.clock.now,
            seconds_left,
        )
    )
    logger.info(
        "ran a task handed here" if result is not None else "a task handed here was not ours",
        extra={"from": handed.forwarded_from, "task_id": handed.task_id},
    )
    return versions.task_result_json(result)


def count(name: str, value: float = 1, unit: MetricUnit = MetricUnit.Count) -> None:
    """Add to an EMF metric of namespace WorkflowRunner."""
    metrics.add_metric(name=name, unit=unit, value=value)


def report_purge(result: PurgeResult) -> None:
    """The purge's metrics and its log line (DueScan)."""
    count("RunsPurged", result.runs)
    count("PurgedEvents", result.events)
    count("PurgedInboxRows", result.inbox_rows)
    count("PurgeBacklogLeft", 1 if result.more_left else 0)
    logger.info(
        "purge done",
        extra={
            "runs": result.runs,
            "events": result.events,
            "inbox_rows": result.inbox_rows,
            "outbox_rows": result.outbox_rows,
            "more_left": result.more_left,
        },
    )


def reject(error: InvalidInput, what: str) -> InvalidInput:
    """Log and count invalid input; return it for the caller to raise (never swallowed:
    for EventBridge and SQS sources the failure is what routes it to a DLQ)."""
    logger.error(f"invalid {what}: {error}", extra={"invalid_input": what})
    count("InvalidInput")
    return error


def parse_model(event: Any, model: type[M], what: str) -> M:
    """Parse an input with the Powertools parser, once its depth and size are known to
    be within bounds (a direct invoke arrives decoded by the Lambda runtime).

    Raises:
        InvalidInput: the input is nested deeper than json_input.MAX_DEPTH, over
            MAX_INPUT_BYTES, or does not fit the model; the message names the fields.
    """
    try:
        check_json_value(event, what, max_bytes=MAX_INPUT_BYTES)
    except InvalidInput as error:
        raise reject(error, what) from error
    try:
        return parse(event=event, model=model)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in error.errors()
        )
        raise reject(InvalidInput(f"{what}: {problems}"), what) from error
    except Exception as error:  # not an object at all, or not JSON
        raise reject(InvalidInput(f"{what}: {error}"), what) from error


def parse_eventbridge(event: Any) -> EventBridgeEvent:
    """Validate an EventBridge event's structure (size, fields, not our own source).

    Raises:
        InvalidInput: logged and counted.
    """
    try:
        return parse_envelope(event)
    except InvalidInput as error:
        raise reject(error, "EventBridge event") from error


def domain_event(envelope: EventBridgeEvent) -> DomainEvent:
    """The envelope as a DomainEvent, tenant from TENANT_ID_PATH; correlation keys set.

    Raises:
        InvalidInput: missing or invalid tenant id (logged and counted).
    """
    try:
        event = to_domain_event(envelope, settings().tenant_id_path)
    except InvalidInput as error:
        raise reject(error, "EventBridge event") from error
    logger.append_keys(tenant_id=event.tenant_id, event_id=event.id, event_type=event.type)
    return event


def ignore(envelope: EventBridgeEvent, why: str) -> dict[str, Any]:
    """Answer for an event no registered workflow uses (nothing stored)."""
    logger.info(f"ignored event {envelope.id} of type {envelope.detail_type!r}: {why}")
    count("IgnoredEvents")
    return {"eventId": envelope.id, "ignored": True, "reason": why}


def with_store(operation: Callable[[Store], T]) -> T:
    """Run one engine operation on the cached connection, once more on a fresh
    connection after a transient failure (a failover drops every connection; the
    operations are single transactions, so a retry is safe)."""
    global _heap_settled
    rt = runtime()
    redaction.configure(settings().log_exception_text)
    # Passes run inside make `ctx.callback.url` from the deployment's callback endpoint.
    with callback_links(settings().callback_base_url):
        try:
            return operation(rt.store())
        except TransientStoreError as error:
            logger.warning(f"transient database error, reconnecting: {error}")
            if rt.reconnect is not None:
                rt.reconnect()
            return operation(rt.store())
        finally:
            if not _heap_settled:
                # After its first engine call a warm container holds what it keeps
                # for good (runtime, connection, registry, workflow modules): from
                # here on a full collection walks only what requests create (heap.py).
                _heap_settled = True
                heap.settle()


def report_work(result: WorkResult) -> dict[str, Any]:
    """StepDispatcher's metrics and answer. DeliveriesFailed and TasksFailed are system
    failures (a partner down, a task raising), apart from the business outcomes of runs;
    the template alarms on them."""
    deliveries = result.deliveries
    for outcome in ("dispatched", "retry", "failed"):
        count(f"DispatchOutcome{outcome.capitalize()}", deliveries.count(outcome))
    count("DeliveriesFailed", deliveries.count("failed"))
    count("TasksCompleted", result.tasks_with("completed"))
    count("TasksFailed", result.tasks_with("failed"))
    count("TaskAttemptsFailed", result.tasks_with("retry"))
    count("TasksOnKeptVersions", sum(1 for t in result.tasks if t.kept_on is not None))
    count("ChildrenStarted", result.children_started)
    if result.resumes_sent or result.children_started or result.children_counted:
        # Started children may have settled (their parents are told on their streams,
        # which the projection turns into resumes) or asked for deliveries.
        runtime().nudger.nudge_projection()
    logger.info(
        "worker done",
        extra={"deliveries": len(deliveries.outcomes), "tasks": len(result.tasks)},
    )
    return {
        "dispatched": deliveries.count("dispatched"),
        "retried": deliveries.count("retry"),
        "failed": deliveries.count("failed"),
        "tasks": {
            outcome: result.tasks_with(outcome)
            for outcome in ("completed", "failed", "retry", "dropped", "unanswered")
        },
        "resumed": result.resumes_sent,
        "childrenStarted": result.children_started,
        "childrenCounted": result.children_counted,
        "drained": result.drained,
    }


def record_outcomes(outcomes: Iterable[RunOutcome]) -> int:
    """Count started runs and where their first pass left them; return how many."""
    n = 0
    for outcome in outcomes:
        n += 1
        count("RunsStarted")
        if outcome.outcome == "completed":
            count("RunsCompleted")
        elif outcome.outcome == "failed":
            count("RunsFailed")
    return n


def resume(message: ResumeMessage) -> dict[str, Any]:
    """ResumeRun's direct invoke (console, CLI): resume one run and answer with the outcome.

    Unlike a queue delivery, a request that is not due yet is answered (`not-due`, with
    when it is due) and nothing is queued, and a `stepIndex` the run does not wait at is
    refused naming the step it waits at.

    Raises:
        RunNotFound: the tenant has no such run.
        InvalidInput: the run waits at another step (nothing written).
    """
    now = runtime().clock.now()
    (result,) = resume_batch([message], now=now, direct=True)
    if isinstance(result, Exception):
        raise result
    if message.forwarded_from is not None:
        # Handed here by another version: it reports a wrong step as a queue would.
        return resume_result_json(result, now) | {"waitingAt": result.waiting_at}
    if result.waiting_at is not None:
        raise reject(
            InvalidInput(
                f"resume request: stepIndex: run {result.run_id} waits at step "
                f"{result.waiting_at}, not at step {message.step_index}; nothing was resumed"
            ),
            "resume request",
        )
    return resume_result_json(result, now)


def resume_batch(
    messages: Sequence[ResumeMessage],
    hold: Hold | None = None,
    now: datetime | None = None,
    direct: bool = False,
) -> list[ResumeResult | Exception]:
    """Resume several runs in one transaction (engine.resume_batch) and report.

    An unknown run, or another tenant's, comes back as its RunNotFound (nothing
    written); a failure of the whole transaction raises, so the whole batch is retried.
    `hold`: queue deliveries hold requests that came up to its seconds early (sqs_hold);
    `direct`: a direct invoke, whose early request is answered instead of requeued.
    """
    rt = runtime()
    now = now or rt.clock.now()
    items = [
        ResumeRequestItem(
            m.tenant_id, m.run_id, m.step_index, force=m.force, forwarded_from=m.forwarded_from
        )
        for m in messages
    ]
    report = with_store(
        lambda store: engine_resume_batch(
            store,
            rt.resume_queue,
            rt.nudger,
            items,
            now,
            registry(),
            hold,
            requeue_early=not direct,
            hosts=kept_hosts(),
            forwarder=forwarder(),
        )
    )
    for message, result in zip(messages, report.results, strict=True):
        logger.append_keys(tenant_id=message.tenant_id, run_id=message.run_id)
        if isinstance(result, RunNotFound):
            logger.error(str(result))
        elif isinstance(result, Exception):
            logger.error(f"resume failed: {type(result).__name__}")
        else:
            logger.info(
                f"resume {result.outcome}",
                extra={"outcome": result.outcome, "kept_on": result.kept_on},
            )
    for name, value in (
        ("RunNotFound", report.not_found),
        ("ResumeErrors", report.errors),
        ("ResumesRequeued", report.requeued),
        ("RunsResumed", report.resumed),
        ("ResumesOnKeptVersions", report.forwarded),
        ("RunsCompleted", report.completed),
        ("RunsFailed", report.failed),
    ):
        if value:
            count(name, value)
    for lag in report.lag_seconds:
        count("ResumeLagSeconds", lag, MetricUnit.Seconds)
    return report.results


def sqs_hold() -> Hold:
    """ResumeRun holds queue requests that arrive early by up to RESUME_HOLD_SECONDS
    (the due scan sends them that early; SQS delays are whole seconds)."""
    rt = runtime()
    seconds = settings().resume_hold_seconds

    def wait_until(instant: datetime) -> datetime | None:
        wait = (instant - rt.clock.now()).total_seconds()
        if wait > seconds + 0.5:  # not what a hold is for: back to the queue
            return None
        if wait > 0:
            time.sleep(wait)
        return rt.clock.now()

    return Hold(seconds, wait_until)


def resume_sqs_batch(event: dict[str, Any]) -> dict[str, Any]:
    """ResumeRun's SQS input: the whole batch in one transaction; bad or failing
    messages come back as partial batch failures (after maxReceiveCount: the DLQ)."""
    failures: list[str] = []
    valid: list[tuple[str, ResumeMessage]] = []
    for record in SQSEvent(event).records:
        try:
            valid.append((record.message_id, _resume_message(record.body)))
        except InvalidInput:
            failures.append(record.message_id)
    results = resume_batch([message for _, message in valid], sqs_hold()) if valid else []
    failures += [
        mid for (mid, _), r in zip(valid, results, strict=True) if isinstance(r, Exception)
    ]
    return {"batchItemFailures": [{"itemIdentifier": mid} for mid in failures]}


def _resume_message(body: str) -> ResumeMessage:
    """One resume queue message (logged and counted when it is invalid)."""
    try:
        decoded = parse_json(body, "resume message", max_bytes=MAX_INPUT_BYTES)
    except InvalidInput as error:
        raise reject(error, "resume message") from error
    return parse_model(decoded, ResumeMessage, "resume message")


def resume_result_json(result: ResumeResult, now: datetime) -> dict[str, Any]:
    """A ResumeResult as the direct invoke's answer (`dueInSeconds`: for `not-due`)."""

    def stamp(value: datetime | None) -> str | None:
        return value.isoformat() if value is not None else None

    due_in = None
    if result.outcome == "not-due" and result.wake_at is not None:
        due_in = max(0, math.ceil((result.wake_at - now).total_seconds()))
    answer = {
        "outcome": result.outcome,
        "tenantId": result.tenant_id,
        "runId": result.run_id,
        "stepIndex": result.step_index,
        "wakeAt": stamp(result.wake_at),
        "dueInSeconds": due_in,
        "suspendedAt": result.suspended_at,
        "nextWakeAt": stamp(result.resumed_wake_at),
        "reason": result.reason,
    }
    if result.kept_on is not None:
        answer["keptOn"] = result.kept_on  # the kept version that answered
    return answer
