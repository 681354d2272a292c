"""EventWakeup: an awaited event wakes the waiting runs it matches, at once.

Input: an SQS batch from the wakeup intake queue (each record's body is an EventBridge
event; failed records come back as batch item failures, then land in the intake DLQ), or
one EventBridge event by direct invoke, which raises when it fails. The woken runs go to
the resume queue straight away (no delay), so a run resumes well under a second after
its event instead of at the next due-scan tick.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import intake
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.aws.observability import annotate
from workflow_runner.engine.enqueue import enqueue_due
from workflow_runner.engine.wakeup import wake_on_event


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if intake.is_sqs_batch(event):
        return intake.each_event(event, wake)
    return wake(event)


def wake(event: dict[str, Any]) -> dict[str, Any]:
    envelope = support.parse_eventbridge(event)
    if envelope.detail_type not in support.registry().awaited_types():
        return support.ignore(envelope, "no registered workflow waits for this type")
    domain = support.domain_event(envelope)
    annotate(tenant_id=domain.tenant_id, event_id=domain.id)
    rt = support.runtime()
    now = rt.clock.now()
    woken = support.with_store(lambda store: wake_on_event(store, domain, now))
    sent, refused = support.with_store(
        lambda store: enqueue_due(
            store, rt.resume_queue, woken, now, support.settings().resume_lease_seconds
        )
    )
    if len(woken) == 1:
        annotate(run_id=woken[0].run_id)
    support.count("Wakeups", len(woken))
    if woken:
        rt.nudger.nudge_projection()
    logger.info("awaited event matched", extra={"woken": len(woken), "enqueued": sent})
    return {
        "eventId": domain.id,
        "woken": [{"runId": w.run_id, "stepIndex": w.step_index} for w in woken],
        "enqueued": sent,
        "refused": refused,
    }
