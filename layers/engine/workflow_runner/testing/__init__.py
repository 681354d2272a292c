"""workflow_runner.testing: test your own workflows with pytest.

    from workflow_runner.testing import WorkflowTestEnv

    with WorkflowTestEnv(modules=["my_flows"], now="2030-01-01T09:00:00Z") as env:
        env.put_event(tenant=TENANT, type="order.placed", payload={"orderId": "o-1"})
        env.advance("PT1H")            # moves the clock and runs everything that became due
        run = env.run(tenant=TENANT, workflow="order-approval", key="o-1")
        run.status, run.steps, run.events
        env.mails, env.webhooks        # what would have been sent
        env.complete_callback(env.mails[0].body, {"ok": True})   # an outside system answers
        env.migrate_runs(workflow="order-approval", to_version=2, mapping=["0=1"])

Needs the `testing` extra (embedded PostgreSQL, PyYAML, Powertools) and the SAM
application's template.yaml with its functions/ (see docs/testing.md).
"""

from __future__ import annotations

from ..engine.callbacks import CallbackRefused
from ..engine.pinning import PinnedDefinition
from ..engine.run_migration import MigrationReport
from .env import WorkflowTestEnv
from .records import RunEvent, RunSnapshot, SentMail, SentWebhook
from .workflows import registry_of

__all__ = [
    "CallbackRefused",
    "MigrationReport",
    "PinnedDefinition",
    "RunEvent",
    "RunSnapshot",
    "SentMail",
    "SentWebhook",
    "WorkflowTestEnv",
    "registry_of",
]
