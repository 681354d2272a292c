"""What the callback tests on PostgreSQL share: starting a run, the tokens its mails
carried, resuming it where it waits, counting rows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from workflow_runner import engine as ops
from workflow_runner import run_id_for
from workflow_runner.callback_tokens import tokens_in
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.store import Store

from tests.support import TENANT_A, event
from tests.support import resume_open as resume_open  # one helper, the callback tests' too


def start_run(
    store: Store,
    registry: WorkflowRegistry,
    now: datetime,
    key: str = "x-1",
    tenant: str = TENANT_A,
    type: str = "expense.filed",
    project: bool = True,
) -> str:
    ops.ingest_domain_event(store, event(type, {"id": key}, tenant), now, registry)
    if project:
        ops.project_pending(store, now)
    return run_id_for(registry_name(registry, type), key)


def registry_name(registry: WorkflowRegistry, type: str) -> str:
    (definition,) = registry.triggered_by(type)
    return definition.name


def mail_tokens(store: Store, run_id: str, tenant: str = TENANT_A) -> list[str]:
    """The tokens the run's mails carried, oldest first (what the outside system got)."""
    rows = store.conn.execute(
        "SELECT request FROM dispatch_outbox WHERE tenant_id = %s AND run_id = %s"
        " ORDER BY created_at, request_id",
        (tenant, run_id),
    ).fetchall()
    return [token for row in rows for token in tokens_in(row["request"]["body"])]


def count_rows(store: Store, sql: str, *params: Any) -> int:
    row = store.conn.execute(sql, params).fetchone()
    assert row is not None
    return int(row["n"])


def callback_events(store: Store) -> int:
    return count_rows(store, "SELECT count(*) AS n FROM inbox WHERE type = 'workflow.callback'")


def mailed_tokens(store: Store, run_id: str, tenant: str = TENANT_A) -> dict[str, str]:
    """The token each of the run's mails carried, by the mail's subject."""
    rows = store.conn.execute(
        "SELECT request FROM dispatch_outbox WHERE tenant_id = %s AND run_id = %s",
        (tenant, run_id),
    ).fetchall()
    return {
        row["request"]["subject"]: token
        for row in rows
        for token in tokens_in(row["request"]["body"])
    }


# Whether the budget service the redrive tests' workflows ask is down (a bug, or an
# outage, fixed before the redrive).
BUDGET_DOWN = {"on": True}


def budget_check(ctx: Any) -> int:
    if BUDGET_DOWN["on"]:
        raise RuntimeError("budget service down")
    return 1
