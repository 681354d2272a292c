"""Migrate: the CloudFormation custom resource that applies schema migrations.

Create and Update apply pending migrations (idempotent, serialised by an advisory
lock); Delete succeeds without touching the database (the data outlives the stack).
Every request is answered on its ResponseURL, FAILED with the reason when it fails,
so a deploy never hangs waiting for the resource.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.aws.models import CustomResourceEvent

PHYSICAL_ID = "workflow-runner-schema"


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = support.parse_model(event, CustomResourceEvent, "custom resource event")
    physical_id = request.PhysicalResourceId or PHYSICAL_ID
    if request.RequestType == "Delete":
        support.send_cfn_response(event, "SUCCESS", physical_id)
        return {"status": "SUCCESS", "applied": []}
    try:
        applied = support.with_store(lambda store: store.migrate())
    except Exception as error:
        logger.exception("migration failed")
        support.count("MigrationFailed")
        support.send_cfn_response(event, "FAILED", physical_id, f"migration failed: {error}")
        return {"status": "FAILED", "reason": str(error)}
    names = [f"{m.version:04d}_{m.name}" for m in applied]
    support.count("MigrationsApplied", len(names))
    support.send_cfn_response(event, "SUCCESS", physical_id, data={"Applied": ",".join(names)})
    return {"status": "SUCCESS", "applied": names}
