"""Small helpers shared by tests (not fixtures)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from workflow_runner import DomainEvent
from workflow_runner import operations as ops
from workflow_runner.registry import WorkflowRegistry
from workflow_runner.store import Store

TENANT_A = "11111111-1111-4111-8111-111111111111"
TENANT_B = "22222222-2222-4222-8222-222222222222"


def event(
    type: str, payload: dict[str, Any], tenant: str = TENANT_A, event_id: str | None = None
) -> DomainEvent:
    return DomainEvent(
        id=event_id or str(uuid.uuid4()),
        type=type,
        payload=payload,
        tenant_id=tenant,
        source="tests",
    )


def register(registry: WorkflowRegistry, **kwargs: Any) -> Any:
    """Define a workflow (not in the default registry) and add it to `registry`."""
    from workflow_runner import define_workflow

    wf = define_workflow(register=False, **kwargs)
    registry.register(wf)
    return wf


def trigger(
    store: Store,
    registry: WorkflowRegistry,
    type: str,
    payload: dict[str, Any],
    now: datetime,
    tenant: str = TENANT_A,
    event_id: str | None = None,
) -> ops.IngestResult:
    """Ingest a trigger event and run the pending projection (as the nudge would)."""
    result = ops.ingest_domain_event(store, event(type, payload, tenant, event_id), now, registry)
    ops.project_pending(store, now)
    return result


def stream_types(store: Store, run_id: str, tenant: str = TENANT_A) -> list[str]:
    return [e.type for e in store.load_stream(tenant, run_id)]


def stream(store: Store, run_id: str, tenant: str = TENANT_A) -> list[Any]:
    return store.load_stream(tenant, run_id)


def pending_rows(store: Store, tenant: str = TENANT_A) -> list[dict[str, Any]]:
    return store.list_pending(tenant)


def resume_due(
    store: Store, registry: WorkflowRegistry, now: datetime, tenant: str = TENANT_A
) -> list[ops.ResumeResult]:
    """One due-scan cycle without a queue: project, resume every due row, project again."""
    ops.project_pending(store, now)
    results = [
        ops.resume_run(store, tenant, row.run_id, row.step_index, now, registry=registry)
        for row in ops.due_runs(store, tenant, now, 1000)
    ]
    ops.project_pending(store, now)
    return results
