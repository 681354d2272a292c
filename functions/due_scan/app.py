"""DueScan: every minute, start cron runs and hand due suspensions to the resume queue;
then, for at most PURGE_MAX_SECONDS, purge settled runs past their retention.

It keeps scanning until nothing is due or its budget (DUE_SCAN_BUDGET_SECONDS, and
never past the function's own remaining time) ends, topping up the tenants held to their
share or to TENANT_MAX_IN_FLIGHT as ResumeRun makes room. A completed scan counts a
heartbeat, whose alarm pages when scans stop completing.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.flow_metrics import report_limits_queued
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.aws.models import ScheduledInput
from workflow_runner.aws.observability import heartbeat
from workflow_runner.engine.due_scan import due_scan
from workflow_runner.engine.purge import purge_settled_runs


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    support.parse_model(event or {}, ScheduledInput, "due scan input")
    rt, cfg = support.runtime(), support.settings()
    # Leave 10 s of the function's timeout to finish sending and flush metrics.
    budget = min(cfg.due_scan_budget_seconds, context.get_remaining_time_in_millis() / 1000 - 10)
    result = support.with_store(
        lambda store: due_scan(
            store,
            rt.resume_queue,
            rt.clock.now(),
            budget_seconds=max(1.0, budget),
            horizon_seconds=cfg.due_scan_horizon_seconds,
            batch=cfg.due_scan_batch,
            lease_seconds=cfg.resume_lease_seconds,
            registry=support.registry(),
            tenant_queue_seconds=cfg.due_scan_tenant_queue_seconds,
            tenant_max_in_flight=cfg.tenant_max_in_flight,
            wait_for_room=cfg.due_scan_wait_for_room,
        )
    )
    support.count("DueRows", result.leased)
    support.count("DueTenants", result.tenants)
    support.count("DueTenantsHeld", result.held_tenants)
    support.count("DueTenantsCapped", result.capped_tenants)
    support.count("ResumeEnqueueRefused", result.refused)
    support.count("DueBacklogLeft", 0 if result.drained else 1)
    support.count("DueLagSeconds", result.max_lag_seconds, MetricUnit.Seconds)
    support.with_store(lambda store: report_limits_queued(store, rt.clock.now()))
    if support.record_outcomes(result.cron_started):
        rt.nudger.nudge_projection()
        rt.nudger.nudge_dispatcher()
    heartbeat("DueScan")
    # After the scan, never before it: due runs are never held back by the purge.
    purge_budget = min(cfg.purge_max_seconds, context.get_remaining_time_in_millis() / 1000 - 10)
    if purge_budget > 0:
        support.report_purge(
            support.with_store(
                lambda store: purge_settled_runs(
                    store,
                    rt.clock.now(),
                    registry=support.registry(),
                    default_retention=cfg.default_retention,
                    batch_size=cfg.purge_batch_size,
                    budget_seconds=purge_budget,
                )
            )
        )
    logger.info(
        "due scan done",
        extra={
            "leased": result.leased,
            "drained": result.drained,
            "held": result.held_tenants,
            "capped": result.capped_tenants,
        },
    )
    return {
        "tenants": result.tenants,
        "leased": result.leased,
        "enqueued": result.enqueued,
        "refused": result.refused,
        "drained": result.drained,
        "heldTenants": result.held_tenants,
        "cappedTenants": result.capped_tenants,
        "cronStarted": [o.run_id for o in result.cron_started],
    }
