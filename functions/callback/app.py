"""Callback: an outside system completes a run's wait_for_callback with its token.

Input: a Lambda Function URL request (AuthType NONE: the token is the credential),
POST `<url>/<token>` with the JSON payload as the body, or POST `<url>` with
`{"token", "payload"}` (see aws/callback_endpoint.py for every answer). A completion
is recorded in one transaction and the run goes to the resume queue at once, as a
matched event's does; refusals and bad requests are answered, never raised (nothing
was written). A database failure raises: the caller sees a 5xx and may retry.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import callback_endpoint as endpoint
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.aws.observability import annotate
from workflow_runner.engine.callbacks import CallbackRefused, complete_callback, enqueue_resume
from workflow_runner.errors import InvalidInput


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    rt = support.runtime()
    now = rt.clock.now()
    try:
        request = endpoint.parse_request(event)
        completion = support.with_store(
            lambda store: complete_callback(
                store, request.token, request.payload, now, endpoint.SOURCE
            )
        )
    except endpoint.MethodNotAllowed as error:
        return endpoint.not_allowed(str(error))
    except InvalidInput as error:
        return endpoint.invalid(support.reject(error, "callback request"))
    except CallbackRefused as error:
        support.count("CallbacksRefused")
        logger.info("callback refused", extra={"reason": error.reason})
        return endpoint.refused(error)
    annotate(tenant_id=completion.tenant_id, run_id=completion.run_id)
    lease = support.settings().resume_lease_seconds
    support.with_store(lambda store: enqueue_resume(store, rt.resume_queue, completion, now, lease))
    support.count("CallbacksCompleted")
    logger.info(
        "callback completed",
        extra={"tenant_id": completion.tenant_id, "run_id": completion.run_id},
    )
    return endpoint.completed()
