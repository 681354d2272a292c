"""Migrate: the CloudFormation custom resource that applies schema migrations.

Create and Update apply pending migrations (idempotent, serialised by an advisory lock)
within the function's time, each attempt waiting at most LOCK_TIMEOUT_S for a lock, so a
busy table delays a deploy instead of stalling every query behind a waiting ALTER.
Delete succeeds without touching the database (the data outlives the stack). Every
request with a ResponseURL is answered, FAILED with the reason when it is malformed,
fails or runs out of time (workflow_runner.aws.custom_resource).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import custom_resource
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer

PHYSICAL_ID = "workflow-runner-schema"
LOCK_TIMEOUT_S = 5.0


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    result = custom_resource.run(
        event, context, physical_id=PHYSICAL_ID, work=migrate, what="schema migration"
    )
    if result["status"] == "FAILED":
        support.count("MigrationFailed")
        return {"status": "FAILED", "reason": result["reason"]}
    applied = result["data"].get("Applied", "")
    return {"status": "SUCCESS", "applied": applied.split(",") if applied else []}


def migrate(budget_s: float) -> Mapping[str, str]:
    applied = support.with_store(
        lambda store: store.migrate(budget_seconds=budget_s, lock_timeout_seconds=LOCK_TIMEOUT_S)
    )
    names = [f"{m.version:04d}_{m.name}" for m in applied]
    support.count("MigrationsApplied", len(names))
    return {"Applied": ",".join(names)}
