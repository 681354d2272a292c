"""Migrate: the CloudFormation custom resource that applies schema migrations and judges
the deploy's code against the runs waiting in the database.

Create and Update apply pending migrations (idempotent, serialised by an advisory lock)
within the function's time, each attempt waiting at most LOCK_TIMEOUT_S for a lock, so a
busy table delays a deploy instead of stalling every query behind a waiting ALTER. Then
they register the workflow definitions of this deploy (WORKFLOW_MODULES) with their
shapes and count the waiting runs they would resume and fail (engine.doctor
.stranded_runs); with STRANDED_RUNS_POLICY=fail a run that would fail fails the deploy
(the functions depend on this resource: CloudFormation rolls back before any runs the
new code), with `warn` they are logged and counted (StrandedRuns).
Delete succeeds without touching the database (the data outlives the stack). Every
request with a ResponseURL is answered, FAILED with the reason when it is malformed,
fails or runs out of time (workflow_runner.aws.custom_resource).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from workflow_runner.aws import custom_resource
from workflow_runner.aws import lambda_support as support
from workflow_runner.aws.lambda_support import logger, metrics, tracer
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine.pinning import StrandedRuns, register, stranded_runs
from workflow_runner.store import Store

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
    return {
        "status": "SUCCESS",
        "applied": applied.split(",") if applied else [],
        "waitingRuns": result["data"].get("WaitingRuns", ""),
    }


def migrate(budget_s: float) -> Mapping[str, str]:
    applied = support.with_store(
        lambda store: store.migrate(budget_seconds=budget_s, lock_timeout_seconds=LOCK_TIMEOUT_S)
    )
    names = [f"{m.version:04d}_{m.name}" for m in applied]
    support.count("MigrationsApplied", len(names))
    stranded = support.with_store(lambda store: judge_waiting_runs(store, support.registry()))
    support.count("StrandedRuns", stranded.failing)
    report = stranded.summary()
    if stranded.failing:
        report = f"{report}: " + " | ".join(stranded.failures)
        if support.settings().stranded_runs_policy == "fail":
            raise StrandedRunsError(
                f"this deploy would fail waiting runs (StrandedRunsPolicy=fail): {report}"
            )
        logger.warning("this deploy will fail waiting runs", extra={"detail": report})
    # CloudFormation keeps at most 4 KB of a response's Data.
    return {"Applied": ",".join(names), "WaitingRuns": report[:1000]}


class StrandedRunsError(Exception):
    """The deploy's code would fail waiting runs and the policy says stop."""


def judge_waiting_runs(store: Store, registry: WorkflowRegistry) -> StrandedRuns:
    """Register this deploy's definitions and judge the waiting runs against them."""
    register(store, list(registry), datetime.now(UTC))
    return stranded_runs(store, registry)
