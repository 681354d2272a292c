"""ResumeRun: resume one suspension per request.

Two inputs: an SQS batch from the resume queue (partial batch failures: a bad or
failing message is reported and, after the queue's maxReceiveCount, lands in its DLQ),
or a direct invoke ``{"tenantId", "runId", "stepIndex", "force"?}`` from the console
or the CLI, answered with the outcome (`not-due` says when, and queues nothing). An
unknown run, another tenant's, or a step the run does not wait at raises.

A run whose definition this version's code lacks (and whose shape no longer agrees) is
handed to the older version of this function that registered it (kept code,
definition/hosts.py); that version's answer is this one's. A request handed here carries
`forwardedFrom` and is never handed on.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.flow_metrics import report_limit_waits
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.aws.models import ResumeMessage
from workflow_runner.aws.observability import annotate, annotate_resume_batch
from workflow_runner.definition.hosts import RESUME_RUN


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    support.host_definitions(RESUME_RUN, context)
    if isinstance(event, dict) and "Records" in event:
        annotate_resume_batch(event)
        answer = support.resume_sqs_batch(event)
    else:
        message = support.parse_model(event, ResumeMessage, "resume request")
        annotate(tenant_id=message.tenant_id, run_id=message.run_id)
        answer = support.resume(message)
    support.with_store(report_limit_waits)  # runs that waited for a limit and now ran
    return answer
