"""PendingProjection: catch workflow_run_pending up with the run streams.

Invoked asynchronously (a nudge after appends) and by a schedule as a safety net; the
input is ignored: the projection always continues from its checkpoint. Waits that an
already-stored event satisfies, and new suspensions due before the next due-scan tick,
are sent to the resume queue at once (delayed to their second). A completed catch-up
counts a heartbeat, whose alarm pages when catch-ups stop completing. A warm container
starts its catch-ups at least PROJECTION_LINGER_MS apart (engine CatchUpPacer): under a
steady stream of nudges each catch-up takes what gathered meanwhile.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.aws.models import ScheduledInput
from workflow_runner.aws.observability import heartbeat
from workflow_runner.engine.enqueue import enqueue_due
from workflow_runner.engine.projection import CatchUpPacer, project_pending

_pacer: CatchUpPacer | None = None  # this container's, built on first use


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    support.parse_model(event or {}, ScheduledInput, "pending projection input")
    rt = support.runtime()
    settings = support.settings()
    global _pacer
    if _pacer is None or _pacer.linger_seconds != settings.projection_linger_ms / 1000:
        _pacer = CatchUpPacer(settings.projection_linger_ms / 1000)
    lingered = _pacer.wait()
    now = rt.clock.now()
    # Each batch commits and is bounded (its look-backs share a budget); stop starting
    # batches 10 s before the timeout, the next invocation continues from the checkpoint.
    budget = max(1.0, context.get_remaining_time_in_millis() / 1000 - 10)
    result = support.with_store(
        lambda store: project_pending(
            store,
            now,
            horizon_seconds=settings.due_scan_horizon_seconds,
            budget_seconds=budget,
        )
    )
    # Timers due before the next due-scan tick go out now, delayed to the second.
    sent, _ = support.with_store(
        lambda store: enqueue_due(
            store,
            rt.resume_queue,
            [*result.woken, *result.due_soon],
            now,
            settings.resume_lease_seconds,
        )
    )
    support.count("ProjectionEventsApplied", result.applied)
    support.count("Wakeups", len(result.woken))
    # ProjectionLagAlarm (template.yaml) watches this: timers and wakeups wait for the
    # projection while it is behind.
    support.count("ProjectionLagSeconds", result.lag_seconds, MetricUnit.Seconds)
    support.count("ProjectionLagEvents", result.lag_events)
    heartbeat("PendingProjection")
    logger.info(
        "pending projection caught up",
        extra={"applied": result.applied, "lag_events": result.lag_events},
    )
    return {
        "applied": result.applied,
        "woken": len(result.woken),
        "dueSoon": len(result.due_soon),
        "enqueued": sent,
        "lagEvents": result.lag_events,
        "lagSeconds": result.lag_seconds,
        "lingeredMs": round(lingered * 1000),
    }
