"""StepDispatcher: the worker. Runs due tasks (s.task, and mail/webhook steps with
result_key), resumes their runs as soon as an outcome is recorded, and delivers pending
fire-and-forget mail and webhook requests.

Nudged asynchronously after passes that scheduled a task or requested a dispatch, and
run by a schedule as a safety net (which also picks up retries whose backoff has
passed and attempts whose worker died). Every call is bounded by the time left. A
completed run counts a heartbeat, whose alarm pages when runs stop completing.

A task whose run's definition this version's code lacks is handed, with its claim, to
the older version of this function that registered it (kept code, definition/hosts.py); a
task handed here (`{"forwardedTask": ...}`) runs under that claim and is answered.
"""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.flow_metrics import report_limit_waits
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.aws.models import ForwardedTask, ScheduledInput
from workflow_runner.aws.observability import heartbeat
from workflow_runner.clock import SystemClock
from workflow_runner.definition.hosts import STEP_DISPATCHER
from workflow_runner.engine.worker import work

# Kept free at the end of the invocation to flush metrics and return.
MARGIN_SECONDS = 5.0


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    support.host_definitions(STEP_DISPATCHER, context)
    if isinstance(event, dict) and "forwardedTask" in event:
        handed = support.parse_model(event, ForwardedTask, "task handed here")
        return support.run_task_handed_here(
            handed, lambda: context.get_remaining_time_in_millis() / 1000 - MARGIN_SECONDS
        )
    support.parse_model(event or {}, ScheduledInput, "step dispatcher input")
    rt, cfg = support.runtime(), support.settings()
    deadline = time.monotonic() + min(
        cfg.dispatch_budget_seconds, context.get_remaining_time_in_millis() / 1000
    )

    def seconds_left() -> float:
        own = context.get_remaining_time_in_millis() / 1000
        return min(deadline - time.monotonic(), own) - MARGIN_SECONDS

    ports = support.task_ports()
    result = support.with_store(
        lambda store: work(
            store,
            ports,
            rt.resume_queue,
            rt.clock.now,
            seconds_left,
            max_attempts=cfg.dispatch_max_attempts,
            webhook_timeout=cfg.webhook_timeout_seconds,
            # A throttled task's next turn within the budget is waited for (deployed:
            # real time; the local runtime's clock moves only when told).
            wait=time.sleep if isinstance(rt.clock, SystemClock) else None,
        )
    )
    answer = support.report_work(result)
    support.with_store(report_limit_waits)  # attempts that waited for a limit
    heartbeat("StepDispatcher")
    return answer
