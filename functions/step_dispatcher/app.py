"""StepDispatcher: deliver pending mail and webhook requests from the outbox.

Nudged asynchronously after passes that may have requested a dispatch, and run by a
schedule as a safety net (which also picks up retries whose backoff has passed). A
completed run counts a heartbeat, whose alarm pages when runs stop completing.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.aws.models import ScheduledInput
from workflow_runner.aws.observability import heartbeat
from workflow_runner.dispatcher import WebhookGuard, dispatch_pending


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    support.parse_model(event or {}, ScheduledInput, "step dispatcher input")
    rt, cfg = support.runtime(), support.settings()
    guard = rt.extras.get("webhook_guard") or WebhookGuard(cfg.webhook_allow_hosts)
    budget = min(cfg.dispatch_budget_seconds, context.get_remaining_time_in_millis() / 1000 - 10)
    result = support.with_store(
        lambda store: dispatch_pending(
            store,
            rt.clock.now,
            rt.mailer,
            rt.http,
            guard,
            mail_sender=cfg.mail_sender,
            max_attempts=cfg.dispatch_max_attempts,
            timeout=cfg.webhook_timeout_seconds,
            budget_seconds=max(1.0, budget),
        )
    )
    for outcome in ("dispatched", "retry", "failed"):
        support.count(f"DispatchOutcome{outcome.capitalize()}", result.count(outcome))
    heartbeat("StepDispatcher")
    logger.info("dispatch done", extra={"attempts": len(result.outcomes)})
    return {
        "dispatched": result.count("dispatched"),
        "retried": result.count("retry"),
        "failed": result.count("failed"),
        "drained": result.drained,
    }
