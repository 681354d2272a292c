"""Domain events as received (`inbox`) and the tenants seen."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from ..errors import StoreError
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
    """A stored event a new wait may take (the look-back); `instant`: its EventBridge
    time, else its receive time."""

    event_id: str
    detail: Any
    instant: datetime
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
        match_keys: Sequence[str] | None = None,
    ) -> bool:
        """Store a domain event; False when it was stored before (a redelivery).

        `match_keys`: the keys the event offers (match.inbox_keys), which the look-back
        finds it by. `read=False` sends without reading the outcome (for pipelines) and
        returns True.
        """
        params = {
            "tenant_id": tenant_id,
            "event_id": event_id,
            "source": source,
            "type": type,
            "detail": Jsonb(detail),
            "event_time": event_time,
            "received_at": received_at,
            "match_keys": None if match_keys is None else list(match_keys),
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

    def wakeup_state(self, tenant_id: str, event_id: str) -> tuple[datetime, bool]:
        """A stored awaited event's instant (EventBridge time, else receive time) and
        whether every waiting run has been matched against it already.

        Raises:
            StoreError: the event is not stored.
        """
        row = self._sql.one("inbox_wakeup_state", {"tenant_id": tenant_id, "event_id": event_id})
        if row is None:
            raise StoreError(f"event {event_id} of tenant {tenant_id} is not in the inbox")
        return row["instant"], bool(row["done"])

    def finish_wakeup(self, tenant_id: str, event_id: str, now: datetime) -> None:
        """Record that every waiting run has been matched against the event."""
        self._sql.run(
            "finish_inbox_wakeup", {"tenant_id": tenant_id, "event_id": event_id, "now": now}
        )

    def lookback(
        self,
        tenant_id: str,
        run_id: str,
        type: str,
        key: str | None,
        after: tuple[datetime, int],
        exclude: Sequence[str],
        limit: int,
    ) -> list[CandidateEvent]:
        """Stored events of a type a new wait of run `run_id` may take, in (instant,
        position) order after `after`: those offering the equality key `key` (and those
        stored without keys), or, without a key, all of them; never one the run consumed
        with an earlier wait (run_consumed_events, or `exclude` of a 0.1 suspension).
        Index-driven either way (lookback_keyed, lookback_any in queries.sql)."""
        rows = self._sql.all(
            "lookback_keyed" if key is not None else "lookback_any",
            {
                "tenant_id": tenant_id,
                "run_id": run_id,
                "type": type,
                "key": key,
                "after_instant": after[0],
                "after_position": after[1],
                "exclude": list(exclude),
                "limit": limit,
            },
        )
        return [
            CandidateEvent(r["event_id"], r["detail"], r["instant"], r["position"]) for r in rows
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
