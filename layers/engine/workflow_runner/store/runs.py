"""The run summary (`workflow_runs`): an inline projection written with each pass."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..stream import RunStatus
from .sql import Sql


@dataclass(frozen=True)
class RunSummary:
    """One run as the summary table has it (`version`: the stream's version;
    `workflow_version`: the definition's, None on rows older releases wrote until the
    run's next pass)."""

    tenant_id: str
    run_id: str
    workflow_name: str
    status: RunStatus
    version: int
    definition_fingerprint: str
    trigger_event_type: str
    started_at: datetime
    updated_at: datetime
    workflow_version: int | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunSummary:
        return cls(
            tenant_id=row["tenant_id"],
            run_id=row["run_id"],
            workflow_name=row["workflow_name"],
            status=row["status"],
            version=row["version"],
            definition_fingerprint=row["definition_fingerprint"],
            trigger_event_type=row["trigger_event_type"],
            started_at=row["started_at"],
            updated_at=row["updated_at"],
            workflow_version=row.get("workflow_version"),
        )


class RunStore:
    """Write and read run summaries."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def upsert(
        self,
        tenant_id: str,
        run_id: str,
        workflow_name: str,
        status: RunStatus,
        version: int,
        definition_fingerprint: str,
        trigger_event_type: str,
        now: datetime,
        workflow_version: int | None = None,
    ) -> None:
        """Record where a run stands, in the transaction that appended its events
        (`workflow_version` None: keep the version recorded before)."""
        self._sql.run(
            "upsert_run",
            {
                "tenant_id": tenant_id,
                "run_id": run_id,
                "workflow_name": workflow_name,
                "status": status,
                "version": version,
                "definition_fingerprint": definition_fingerprint,
                "trigger_event_type": trigger_event_type,
                "now": now,
                "workflow_version": workflow_version,
            },
        )

    def move(
        self,
        tenant_id: str,
        run_id: str,
        definition_fingerprint: str,
        workflow_version: int,
        now: datetime,
    ) -> None:
        """Record that a migration moved the waiting run onto another definition (its
        version stays where the resume reads its stream from)."""
        self._sql.run(
            "migrate_run_summary",
            {
                "tenant_id": tenant_id,
                "run_id": run_id,
                "definition_fingerprint": definition_fingerprint,
                "workflow_version": workflow_version,
                "now": now,
            },
        )

    def get(self, tenant_id: str, run_id: str) -> RunSummary | None:
        row = self._sql.one("get_run", {"tenant_id": tenant_id, "run_id": run_id})
        return None if row is None else RunSummary.from_row(row)

    def lock(self, tenant_id: str, run_id: str) -> bool:
        """Lock a run's summary row to the end of the transaction; False: no such run (or
        it was purged meanwhile). Writers of settled runs (a redrive) take it so that the
        purge, which skips locked summaries, never deletes a run they are writing."""
        row = self._sql.one("lock_run_summary", {"tenant_id": tenant_id, "run_id": run_id})
        return row is not None

    def for_tenant(
        self,
        tenant_id: str,
        workflow_name: str | None = None,
        status: RunStatus | None = None,
        limit: int = 1000,
    ) -> list[RunSummary]:
        """A tenant's runs, most recently updated first."""
        rows = self._sql.all(
            "list_runs",
            {
                "tenant_id": tenant_id,
                "workflow_name": workflow_name,
                "status": status,
                "limit": limit,
            },
        )
        return [RunSummary.from_row(r) for r in rows]
