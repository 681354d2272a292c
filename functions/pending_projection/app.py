"""PendingProjection: catch workflow_run_pending up with the run streams.

Invoked asynchronously (a nudge after appends) and by a schedule as a safety net; the
input is ignored: the projection always continues from its checkpoint. Waits that an
already-stored event satisfies, and new suspensions due before the next due-scan tick,
are sent to the resume queue at once (delayed to their second). A completed catch-up
counts a heartbeat, whose alarm pages when catch-ups stop completing.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.aws.models import ScheduledInput
from workflow_runner.aws.observability import heartbeat
from workflow_runner.engine.enqueue import enqueue_due
from workflow_runner.engine.projection import project_pending


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    support.parse_model(event or {}, ScheduledInput, "pending projection input")
    rt = support.runtime()
    now = rt.clock.now()
    settings = support.settings()
    result = support.with_store(
        lambda store: project_pending(store, now, horizon_seconds=settings.due_scan_horizon_seconds)
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
    heartbeat("PendingProjection")
    logger.info("pending projection caught up", extra={"applied": result.applied})
    return {
        "applied": result.applied,
        "woken": len(result.woken),
        "dueSoon": len(result.due_soon),
        "enqueued": sent,
    }
