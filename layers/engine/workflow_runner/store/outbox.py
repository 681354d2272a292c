"""The transactional outbox of fire-and-forget mail and webhook requests (`dispatch_outbox`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeAlias

from psycopg.types.json import Jsonb

from .sql import Sql

DispatchStatus: TypeAlias = Literal["pending", "dispatched", "failed"]


@dataclass(frozen=True)
class OutboxRow:
    """A dispatch request (`request` is None once delivered or erased).

    `stream_version` is the version of the request's dispatch stream the next outcome
    follows; `sending_since` is set while a mail is being handed to the provider.
    """

    tenant_id: str
    request_id: str
    run_id: str
    step_kind: str
    request: dict[str, Any] | None
    attempts: int
    next_attempt_at: datetime
    status: DispatchStatus = "pending"
    leased_until: datetime | None = None
    stream_version: int = 1
    sending_since: datetime | None = None
    last_error: str | None = None
    failure_reason: str | None = None
    created_at: datetime | None = None
    settled_at: datetime | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> OutboxRow:
        return cls(
            tenant_id=row["tenant_id"],
            request_id=row["request_id"],
            run_id=row["run_id"],
            step_kind=row["step_kind"],
            request=row.get("request"),
            attempts=int(row["attempts"]),
            next_attempt_at=row["next_attempt_at"],
            status=row.get("status", "pending"),
            leased_until=row.get("leased_until"),
            stream_version=int(row.get("stream_version") or 1),
            sending_since=row.get("sending_since"),
            last_error=row.get("last_error"),
            failure_reason=row.get("failure_reason"),
            created_at=row.get("created_at"),
            settled_at=row.get("settled_at"),
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

    def _keys(self, row: OutboxRow) -> dict[str, Any]:
        return {
            "tenant_id": row.tenant_id,
            "request_id": row.request_id,
            "lease_until": row.leased_until,
        }

    def settle(
        self,
        row: OutboxRow,
        status: Literal["dispatched", "failed"],
        stream_version: int,
        now: datetime,
        error: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Close a request for good under its lease (a failed one keeps its payload)."""
        self._sql.run(
            "settle_dispatch",
            {
                **self._keys(row),
                "status": status,
                "stream_version": stream_version,
                "error": error,
                "reason": reason,
                "now": now,
            },
        )

    def retry(
        self, row: OutboxRow, next_attempt_at: datetime, stream_version: int, error: str
    ) -> None:
        """Schedule another attempt after a transient failure (only under its lease)."""
        self._sql.run(
            "retry_dispatch",
            {
                **self._keys(row),
                "next_attempt_at": next_attempt_at,
                "stream_version": stream_version,
                "error": error,
            },
        )

    def mark_sending(self, row: OutboxRow, now: datetime) -> None:
        """Record that a mail is being handed to the provider (before the call)."""
        self._sql.run("mark_dispatch_sending", {**self._keys(row), "now": now})

    def release(self, row: OutboxRow, now: datetime) -> None:
        """Give a claimed request back unstarted, due at once."""
        self._sql.run("release_dispatch", {**self._keys(row), "now": now})

    def redeliver(
        self, tenant_id: str, request_id: str, stream_version: int, now: datetime
    ) -> bool:
        """Make a failed request (whose payload is still stored) due again with a fresh
        attempt budget; False when it is not failed or its payload is gone."""
        touched = self._sql.run(
            "redeliver_dispatch",
            {
                "tenant_id": tenant_id,
                "request_id": request_id,
                "stream_version": stream_version,
                "now": now,
            },
        )
        return touched == 1

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

    def find(
        self,
        status: Literal["failed", "stuck", "pending"],
        since: datetime,
        stuck_before: datetime,
        tenant_id: str | None = None,
        limit: int = 100,
        before: tuple[datetime, str] | None = None,
    ) -> list[OutboxRow]:
        """Requests across tenants (or of one) by status, newest first; `before` is the
        (created_at, request_id) of the last row of the previous page."""
        rows = self._sql.all(
            "list_deliveries",
            {
                "tenant_id": tenant_id,
                "status": status,
                "since": since,
                "stuck_before": stuck_before,
                "limit": limit,
                "before_created": before[0] if before else None,
                "before_id": before[1] if before else None,
            },
        )
        return [OutboxRow.from_row(r) for r in rows]
