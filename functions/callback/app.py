"""Callback: an outside system answers a run's callback with its token.

Input: a Lambda Function URL request (AuthType NONE: the token is the credential),
POST `<url>/<token>` with the JSON payload as the body (a completion), `…/fail` with
`{"error", "message"}` (a failure) or `…/heartbeat` (a heartbeat), or those paths
without the token with it in the body (see aws/callback_endpoint.py for every answer).
An answer is recorded in one transaction and, when the run waits for it, the run goes
to the resume queue at once, as a matched event's does; refusals and bad requests are
answered, never raised (nothing was written). A database failure raises: the caller
sees a 5xx and may retry.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import callback_endpoint as endpoint
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.aws.observability import annotate
from workflow_runner.engine.callbacks import CallbackCompletion, CallbackRefused, enqueue_resume
from workflow_runner.errors import InvalidInput

# The metric and log line of what was recorded.
_DONE = {
    "complete": ("CallbacksCompleted", "callback completed"),
    "fail": ("CallbacksFailed", "callback failed"),
    "heartbeat": ("CallbackHeartbeats", "callback heartbeat"),
}


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    rt = support.runtime()
    now = rt.clock.now()
    action = endpoint.action_of(event)
    try:
        request = endpoint.parse_request(event)
        outcome = support.with_store(lambda store: endpoint.record(store, request, now))
    except endpoint.MethodNotAllowed as error:
        return endpoint.not_allowed(str(error))
    except InvalidInput as error:
        return endpoint.invalid(support.reject(error, "callback request"), action)
    except CallbackRefused as error:
        support.count("CallbacksRefused")
        logger.info("callback refused", extra={"reason": error.reason, "action": action})
        return endpoint.refused(error, action)
    annotate(tenant_id=outcome.tenant_id, run_id=outcome.run_id)
    if isinstance(outcome, CallbackCompletion):
        lease = support.settings().resume_lease_seconds
        support.with_store(
            lambda store: enqueue_resume(store, rt.resume_queue, outcome, now, lease)
        )
    metric, line = _DONE[request.action]
    support.count(metric)
    logger.info(line, extra={"tenant_id": outcome.tenant_id, "run_id": outcome.run_id})
    return endpoint.recorded(request, outcome)
