"""EventWakeup: an awaited event wakes the waiting runs it matches, at once.

One engine call, safe to run again whole (`wake_and_enqueue`): the matches are recorded
in chunks within the function's time, and every run the event matched that is not on
its way yet goes to the resume queue straight away (no delay), so a run resumes well
under a second after its event instead of at the next due-scan tick. When the time ran
out with waits left, the invocation fails after enqueueing what it matched: Lambda's
retry continues. Invalid input raises (logged, counted, nothing written) and ends in the
events DLQ.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.engine.wakeup import wake_and_enqueue
from workflow_runner.errors import WorkLeft

# Seconds of the function's timeout kept for enqueueing, logging and flushing metrics.
RESERVE_SECONDS = 8.0


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    envelope = support.parse_eventbridge(event)
    if envelope.detail_type not in support.registry().awaited_types():
        return support.ignore(envelope, "no registered workflow waits for this type")
    domain = support.domain_event(envelope)
    rt = support.runtime()
    now = rt.clock.now()
    budget = max(1.0, context.get_remaining_time_in_millis() / 1000 - RESERVE_SECONDS)
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
