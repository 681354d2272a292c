"""Cron triggers' positions (`cron_state`): the last instant started per tenant and workflow."""

from __future__ import annotations

from datetime import datetime

from .sql import Sql


class CronStore:
    """Read and advance a (tenant, workflow) cron position under a row lock."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def lock(self, tenant_id: str, workflow_name: str) -> datetime | None:
        """The last instant started, locked for this transaction (None: first sight)."""
        row = self._sql.one(
            "lock_cron_state", {"tenant_id": tenant_id, "workflow_name": workflow_name}
        )
        return None if row is None else row["last_fire_at"]

    def init(self, tenant_id: str, workflow_name: str, now: datetime) -> None:
        """Start counting from `now` (no historical backfill)."""
        self._sql.run(
            "init_cron_state", {"tenant_id": tenant_id, "workflow_name": workflow_name, "now": now}
        )

    def advance(self, tenant_id: str, workflow_name: str, last_fire_at: datetime) -> None:
        """Record the last scheduled instant started."""
        self._sql.run(
            "advance_cron_state",
            {"tenant_id": tenant_id, "workflow_name": workflow_name, "last_fire_at": last_fire_at},
        )
