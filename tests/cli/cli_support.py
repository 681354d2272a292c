"""Helpers for the `wfr` command-line tests (imported by name: `conftest` is ambiguous
when several test folders have one)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sample_workflows  # noqa: F401  (registers the samples in the default registry)
from workflow_runner.definition import default_registry
from workflow_runner.definition.dsl import DomainEvent
from workflow_runner.engine import ingest_domain_event, project_pending
from workflow_runner.store import Store

from tests.support import TENANT_A as TENANT
from tests.support import TENANT_B as OTHER_TENANT

__all__ = ["OTHER_TENANT", "TENANT"]

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Cli = Callable[..., Result]


def send(
    store: Store,
    type: str,
    detail: dict[str, Any],
    now: datetime = T0,
    tenant: str = TENANT,
    event_id: str | None = None,
) -> Any:
    """Ingest one domain event through the engine and project the pending rows."""
    event = DomainEvent(
        id=event_id or str(uuid.uuid4()),
        type=type,
        payload={"tenantId": tenant, **detail},
        tenant_id=tenant,
        time=now,
        source="tests",
    )
    result = ingest_domain_event(store, event, now, default_registry())
    project_pending(store, now)
    return result


def table_count(store: Store, table: str) -> int:
    """Rows in a table (to prove a refused command wrote nothing)."""
    row = store.conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()
    assert row is not None
    return int(row["n"])
