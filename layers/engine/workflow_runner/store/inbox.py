"""Domain events as received (`inbox`) and the tenants seen."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from .sql import Sql


@dataclass(frozen=True)
class InboxEvent:
    """A stored domain event (`detail` is None once erased)."""

    tenant_id: str
    event_id: str
    source: str
    type: str
    detail: Any
    event_time: datetime | None
    received_at: datetime
    erased_at: datetime | None = None
    position: int = 0

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> InboxEvent:
        return cls(
            tenant_id=row["tenant_id"],
            event_id=row["event_id"],
            source=row["source"],
            type=row["type"],
            detail=row["detail"],
            event_time=row["event_time"],
            received_at=row["received_at"],
            erased_at=row.get("erased_at"),
            position=row.get("position", 0),
        )


@dataclass(frozen=True)
class CandidateEvent:
    """A stored event a new wait may take (the look-back)."""

    event_id: str
    detail: Any
    received_at: datetime
    position: int


class InboxStore:
    """Store, claim and find domain events; every query carries the tenant."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def insert(
        self,
        tenant_id: str,
        event_id: str,
        source: str,
        type: str,
        detail: Any,
        event_time: datetime | None,
        received_at: datetime,
        read: bool = True,
    ) -> bool:
        """Store a domain event; False when it was stored before (a redelivery).

        `read=False` sends without reading the outcome (for pipelines) and returns True.
        """
        params = {
            "tenant_id": tenant_id,
            "event_id": event_id,
            "source": source,
            "type": type,
            "detail": Jsonb(detail),
            "event_time": event_time,
            "received_at": received_at,
        }
        if not read:
            self._sql.run("insert_inbox", params)
            return True
        return self._sql.one("insert_inbox", params) is not None

    def get(self, tenant_id: str, event_id: str) -> InboxEvent | None:
        row = self._sql.one("get_inbox_event", {"tenant_id": tenant_id, "event_id": event_id})
        return None if row is None else InboxEvent.from_row(row)

    def claim_trigger(self, tenant_id: str, event_id: str, now: datetime) -> bool:
        """Mark the event's triggers as processed; False when they were before."""
        row = self._sql.one(
            "claim_inbox_trigger", {"tenant_id": tenant_id, "event_id": event_id, "now": now}
        )
        return row is not None

    def claim_wakeup(self, tenant_id: str, event_id: str, now: datetime) -> datetime | None:
        """Mark an event as matched against waits; its received_at, or None if it was before."""
        row = self._sql.one(
            "claim_inbox_wakeup", {"tenant_id": tenant_id, "event_id": event_id, "now": now}
        )
        return row["received_at"] if row else None

    def candidates(
        self,
        tenant_id: str,
        run_id: str,
        type: str,
        since: datetime,
        exclude: Sequence[str],
        after_position: int = 0,
        limit: int = 500,
    ) -> list[CandidateEvent]:
        """Stored events of a type since an instant that the run has not consumed, by
        position after `after_position`."""
        rows = self._sql.all(
            "awaited_event_candidates",
            {
                "tenant_id": tenant_id,
                "run_id": run_id,
                "type": type,
                "since": since,
                "exclude": list(exclude),
                "after_position": after_position,
                "limit": limit,
            },
        )
        return [
            CandidateEvent(r["event_id"], r["detail"], r["received_at"], r["position"])
            for r in rows
        ]

    def lock_type(self, tenant_id: str, type: str) -> None:
        """Transaction-scoped lock on (tenant, awaited event type): serialises a wakeup
        and the creation of a waiting row, so the two can never miss each other."""
        self._sql.one("lock_event_type", {"tenant_id": tenant_id, "type": type})

    def register_tenant(self, tenant_id: str, now: datetime) -> None:
        """Remember a tenant (the due scan starts its cron workflows)."""
        self._sql.run("register_tenant", {"tenant_id": tenant_id, "now": now})

    def tenants(self) -> list[str]:
        """Every known tenant."""
        return [r["tenant_id"] for r in self._sql.all("list_tenants", {})]
