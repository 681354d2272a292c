"""TriggerProjection: an EventBridge event starts the runs its type triggers.

Invalid input raises after logging and counting it: nothing is written, and Lambda's
async retries followed by the on-failure destination put the event in the events DLQ.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.engine.ingest import ingest_domain_event


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    envelope = support.parse_eventbridge(event)
    registry = support.registry()
    if envelope.detail_type not in registry.trigger_types():
        return support.ignore(envelope, "no registered workflow is triggered by this type")
    domain = support.domain_event(envelope)
    rt = support.runtime()
    result = support.with_store(
        lambda store: ingest_domain_event(store, domain, rt.clock.now(), registry)
    )
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
