"""The transactional outbox of mail and webhook requests (`dispatch_outbox`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeAlias

from psycopg.types.json import Jsonb

from .sql import Sql

DispatchStatus: TypeAlias = Literal["pending", "dispatched", "failed"]


@dataclass(frozen=True)
class OutboxRow:
    """A dispatch request (`request` is None once it settled or was erased)."""

    tenant_id: str
    request_id: str
    run_id: str
    step_kind: str
    request: dict[str, Any] | None
    attempts: int
    next_attempt_at: datetime
    status: DispatchStatus = "pending"
    leased_until: datetime | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> OutboxRow:
        return cls(
            tenant_id=row["tenant_id"],
            request_id=row["request_id"],
            run_id=row["run_id"],
            step_kind=row["step_kind"],
            request=row["request"],
            attempts=int(row["attempts"]),
            next_attempt_at=row["next_attempt_at"],
            status=row.get("status", "pending"),
            leased_until=row.get("leased_until"),
        )


@dataclass(frozen=True)
class OutboxSummary:
    """A run's dispatch request and its delivery state (no request body)."""

    request_id: str
    step_kind: str
    status: DispatchStatus
    attempts: int
    created_at: datetime


class OutboxStore:
    """Record, claim and settle dispatch requests."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def insert(
        self,
        tenant_id: str,
        request_id: str,
        run_id: str,
        step_kind: str,
        request: dict[str, Any],
        now: datetime,
    ) -> None:
        """Record a request in the pass that made it (a repeated id is kept once)."""
        self._sql.run(
            "insert_outbox",
            {
                "tenant_id": tenant_id,
                "request_id": request_id,
                "run_id": run_id,
                "step_kind": step_kind,
                "request": Jsonb(request),
                "now": now,
            },
        )

    def claim(self, now: datetime, lease_until: datetime, limit: int) -> list[OutboxRow]:
        """Lease up to `limit` due requests, oldest first, counting the attempt."""
        rows = self._sql.all(
            "claim_dispatches", {"now": now, "lease_until": lease_until, "limit": limit}
        )
        return [OutboxRow.from_row(r) for r in rows]

    def finish(self, tenant_id: str, request_id: str, status: DispatchStatus) -> None:
        """Settle a request for good and drop its payload (addresses, bodies)."""
        self._sql.run(
            "finish_dispatch", {"tenant_id": tenant_id, "request_id": request_id, "status": status}
        )

    def retry(
        self, tenant_id: str, request_id: str, next_attempt_at: datetime, lease_until: datetime
    ) -> None:
        """Schedule another attempt after a transient failure (only under our lease)."""
        self._sql.run(
            "retry_dispatch",
            {
                "tenant_id": tenant_id,
                "request_id": request_id,
                "next_attempt_at": next_attempt_at,
                "lease_until": lease_until,
            },
        )

    def get(self, tenant_id: str, request_id: str) -> OutboxRow | None:
        row = self._sql.one("get_dispatch", {"tenant_id": tenant_id, "request_id": request_id})
        return None if row is None else OutboxRow.from_row(row)

    def next_due(self) -> datetime | None:
        """When the earliest pending request is due (None: nothing pending)."""
        row = self._sql.one("next_dispatch_due", {})
        return None if row is None else row["due"]

    def of_run(self, tenant_id: str, run_id: str) -> list[OutboxSummary]:
        """A run's requests and their delivery state, oldest first."""
        rows = self._sql.all("cli_outbox_for_run", {"tenant_id": tenant_id, "run_id": run_id})
        return [
            OutboxSummary(
                r["request_id"], r["step_kind"], r["status"], r["attempts"], r["created_at"]
            )
            for r in rows
        ]
