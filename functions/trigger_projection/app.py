"""TriggerProjection: domain events start the runs their types trigger.

Input: an SQS batch from the trigger intake queue (each record's body is an EventBridge
event; failed records come back as batch item failures, then land in the intake DLQ), or
one EventBridge event by direct invoke, which raises when it fails. Invalid input is
logged and counted, and nothing is written.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import intake
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.aws.observability import annotate
from workflow_runner.engine.ingest import ingest_domain_event


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if intake.is_sqs_batch(event):
        return intake.each_event(event, ingest)
    return ingest(event)


def ingest(event: dict[str, Any]) -> dict[str, Any]:
    envelope = support.parse_eventbridge(event)
    registry = support.registry()
    if envelope.detail_type not in registry.trigger_types():
        return support.ignore(envelope, "no registered workflow is triggered by this type")
    domain = support.domain_event(envelope)
    annotate(tenant_id=domain.tenant_id, event_id=domain.id)
    rt = support.runtime()
    result = support.with_store(
        lambda store: ingest_domain_event(store, domain, rt.clock.now(), registry)
    )
    if len(result.started) == 1:
        annotate(run_id=result.started[0].run_id)
    started = support.record_outcomes(result.started)
    if started:
        rt.nudger.nudge_projection()
        rt.nudger.nudge_dispatcher()
    logger.info("event ingested", extra={"stored": result.stored, "started": started})
    return {
        "eventId": result.event_id,
        "stored": result.stored,
        "started": [
            {"runId": o.run_id, "workflow": o.workflow_name, "outcome": o.outcome}
            for o in result.started
        ],
        "skipped": result.skipped,
    }
