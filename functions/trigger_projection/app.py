"""TriggerProjection: domain events start the runs their types trigger.

Input: an SQS batch from the trigger intake queue (each record's body is an EventBridge
event; the batch's events are ingested in one transaction, and one at a time if that
fails; failed records come back as batch item failures, then land in the intake DLQ), or
one EventBridge event by direct invoke, which raises when it fails. Invalid input is
logged and counted, and nothing is written.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import intake
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.aws.observability import annotate, traced
from workflow_runner.definition import DomainEvent
from workflow_runner.engine.ingest import IngestResult, ingest_domain_event, ingest_domain_events
from workflow_runner.envelope import EventBridgeEvent

NOT_A_TRIGGER = "no registered workflow is triggered by this type"


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if intake.is_sqs_batch(event):
        return intake.all_events(event, prepare, ingest_all, ingest)
    return ingest(event)


def prepare(event: dict[str, Any]) -> DomainEvent | None:
    """The domain event of an EventBridge event (None: no workflow is triggered by it)."""
    return _domain(support.parse_eventbridge(event))


def _domain(envelope: EventBridgeEvent) -> DomainEvent | None:
    registry = support.registry()
    kind = envelope.detail_type
    # A trigger, or an event a workflow's cancel_on cancels runs on (flow control).
    if kind not in registry.trigger_types() and kind not in registry.cancel_types():
        support.ignore(envelope, NOT_A_TRIGGER)
        return None
    return support.domain_event(envelope)


def ingest_all(domains: list[DomainEvent]) -> None:
    """An intake batch's trigger events, in one engine transaction."""
    registry, rt = support.registry(), support.runtime()
    results = support.with_store(
        lambda store: ingest_domain_events(store, domains, rt.clock.now(), registry)
    )
    started = 0
    for domain, result in zip(domains, results, strict=True):
        with traced("## intake record"):  # each record's annotations on its own subsegment
            started += _report(domain, result)
    if started:
        rt.nudger.nudge_projection()
        rt.nudger.nudge_dispatcher()


def ingest(event: dict[str, Any]) -> dict[str, Any]:
    """One EventBridge event (a direct invoke, or a record of a batch that failed as a
    whole), in its own engine transaction."""
    envelope = support.parse_eventbridge(event)
    domain = _domain(envelope)
    if domain is None:
        return {"eventId": envelope.id, "ignored": True, "reason": NOT_A_TRIGGER}
    registry, rt = support.registry(), support.runtime()
    result = support.with_store(
        lambda store: ingest_domain_event(store, domain, rt.clock.now(), registry)
    )
    if _report(domain, result):
        rt.nudger.nudge_projection()
        rt.nudger.nudge_dispatcher()
    return {
        "eventId": result.event_id,
        "stored": result.stored,
        "started": [
            {"runId": o.run_id, "workflow": o.workflow_name, "outcome": o.outcome}
            for o in result.started
        ],
        "skipped": result.skipped,
        # A trigger for a run that exists starts nothing: which run it is.
        "existing": [
            {"workflow": e.workflow_name, "runId": e.run_id, "key": e.idempotency_key}
            for e in result.existing
        ],
        "filtered": result.filtered,
    }


def _report(domain: DomainEvent, result: IngestResult) -> int:
    """Count, annotate and log what ingesting one event did; how many runs it started."""
    annotate(tenant_id=domain.tenant_id, event_id=domain.id)
    if len(result.started) == 1:
        annotate(run_id=result.started[0].run_id)
    started = support.record_outcomes(result.started)
    logger.info(
        "event ingested",
        extra={
            "tenant_id": domain.tenant_id,
            "event_id": domain.id,
            "stored": result.stored,
            "started": started,
        },
    )
    return started
