"""EventWakeup: an awaited event wakes the waiting runs it matches, at once.

Input: an SQS batch from the wakeup intake queue (each record's body is an EventBridge
event; failed records come back as batch item failures, then land in the intake DLQ), or
one EventBridge event by direct invoke, which raises when it fails.

One engine call per event, safe to run again whole (`wake_and_enqueue`): the matches
are recorded in chunks within the function's time, and every run the event matched
that is not on its way yet goes to the resume queue straight away (no delay), so a run
resumes well under a second after its event instead of at the next due-scan tick. When
the time ran out with waits left, the record fails after enqueueing what it matched
(WorkLeft): its redelivery continues.
"""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import intake
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.aws.observability import annotate
from workflow_runner.engine.wakeup import wake_and_enqueue
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
        return intake.each_event(event, lambda one: wake(one, deadline))
    return wake(event, deadline)


def wake(event: dict[str, Any], deadline: float) -> dict[str, Any]:
    envelope = support.parse_eventbridge(event)
    if envelope.detail_type not in support.registry().awaited_types():
        return support.ignore(envelope, "no registered workflow waits for this type")
    domain = support.domain_event(envelope)
    annotate(tenant_id=domain.tenant_id, event_id=domain.id)
    rt = support.runtime()
    now = rt.clock.now()
    budget = max(1.0, deadline - time.monotonic())
    result = support.with_store(
        lambda store: wake_and_enqueue(
            store,
            rt.resume_queue,
            domain,
            now,
            support.settings().resume_lease_seconds,
            budget_seconds=budget,
        )
    )
    if result.matched == 1:
        annotate(run_id=result.woken[0].run_id)
    support.count("Wakeups", result.matched)
    if result.refused:
        support.count("ResumeEnqueueRefused", result.refused)
    if result.matched:
        rt.nudger.nudge_projection()
    logger.info(
        "awaited event matched",
        extra={"woken": result.matched, "enqueued": result.enqueued, "complete": result.complete},
    )
    if not result.complete:
        support.count("WakeupsLeft")
        raise WorkLeft(
            f"event {domain.id}: {result.matched} waits woken, {result.enqueued} runs "
            "enqueued before the time ran out; the retry wakes and enqueues the others"
        )
    return {
        "eventId": domain.id,
        "woken": [{"runId": w.run_id, "stepIndex": w.step_index} for w in result.woken[:100]],
        "wokenCount": result.matched,
        "enqueued": result.enqueued,
        "refused": result.refused,
    }
