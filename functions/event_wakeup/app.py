"""EventWakeup: awaited events wake the waiting runs they match, at once.

Input: an SQS batch from the wakeup intake queue (each record's body is an EventBridge
event; failed records come back as batch item failures, then land in the intake DLQ), or
one EventBridge event by direct invoke, which raises when it fails.

One engine call for the batch's awaited events, safe to run again whole
(`wake_and_enqueue_many`): the matches are recorded in chunks within the function's
time, and every run the events matched that is not on its way yet goes to the resume
queue straight away (no delay), so a run resumes well under a second after its event
instead of at the next due-scan tick. A record whose event's time ran out with waits
left fails after what was matched is enqueued (WorkLeft): its redelivery continues. A
bad record fails alone; if the batch call fails, each record is tried on its own.
"""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import intake
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.aws.observability import annotate
from workflow_runner.definition import DomainEvent
from workflow_runner.engine.wakeup import EventMatches, WakeupBatch, wake_and_enqueue_many
from workflow_runner.errors import WorkLeft

# Seconds of the function's timeout kept for enqueueing, logging and flushing metrics.
RESERVE_SECONDS = 8.0


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # The records of a batch share the invocation's time.
    deadline = time.monotonic() + context.get_remaining_time_in_millis() / 1000 - RESERVE_SECONDS
    if intake.is_sqs_batch(event):
        return intake.all_events(
            event,
            prepare,
            lambda domains: [error for error, _ in wake(domains, deadline)],
            lambda one: wake_one(one, deadline),
        )
    return wake_one(event, deadline)


NOT_AWAITED = "no registered workflow waits for this type"


def prepare(event: dict[str, Any]) -> DomainEvent | None:
    """The domain event of an EventBridge event (None: no workflow waits for its type)."""
    envelope = support.parse_eventbridge(event)
    if envelope.detail_type not in support.registry().awaited_types():
        support.ignore(envelope, NOT_AWAITED)
        return None
    return support.domain_event(envelope)


def wake_one(event: dict[str, Any], deadline: float) -> dict[str, Any]:
    """One EventBridge event (a direct invoke, or a record of a batch that failed)."""
    envelope = support.parse_eventbridge(event)
    if envelope.detail_type not in support.registry().awaited_types():
        return support.ignore(envelope, NOT_AWAITED)
    error, answer = wake([support.domain_event(envelope)], deadline)[0]
    if error is not None:
        raise error
    return answer


def wake(
    domains: list[DomainEvent], deadline: float
) -> list[tuple[WorkLeft | None, dict[str, Any]]]:
    """Wake and enqueue for the events in one engine call; per event, WorkLeft when
    its time ran out with work left, and its answer."""
    rt = support.runtime()
    now = rt.clock.now()
    budget = max(1.0, deadline - time.monotonic())
    batch = support.with_store(
        lambda store: wake_and_enqueue_many(
            store,
            rt.resume_queue,
            domains,
            now,
            support.settings().resume_lease_seconds,
            budget_seconds=budget,
        )
    )
    matched = sum(len(m.woken) for m in batch.events)
    support.count("Wakeups", matched)
    if batch.refused:
        support.count("ResumeEnqueueRefused", batch.refused)
    if matched:
        rt.nudger.nudge_projection()
    logger.info(
        "awaited events matched",
        extra={"events": len(domains), "woken": matched, "enqueued": batch.enqueued},
    )
    return [_outcome(batch, i, m) for i, m in enumerate(batch.events)]


def _outcome(
    batch: WakeupBatch, index: int, matches: EventMatches
) -> tuple[WorkLeft | None, dict[str, Any]]:
    event = matches.event
    if len(batch.events) == 1:  # a batch's records share one trace segment
        annotate(tenant_id=event.tenant_id, event_id=event.id)
        if len(matches.woken) == 1:
            annotate(run_id=matches.woken[0].run_id)
    if not batch.complete(index):
        support.count("WakeupsLeft")
        return WorkLeft(
            f"event {event.id}: {len(matches.woken)} waits woken, {batch.enqueued} runs "
            "enqueued before the time ran out; the retry wakes and enqueues the others"
        ), {}
    return None, {
        "eventId": event.id,
        "woken": [{"runId": w.run_id, "stepIndex": w.step_index} for w in matches.woken[:100]],
        "wokenCount": len(matches.woken),
        "enqueued": batch.enqueued,
        "refused": batch.refused,
    }
