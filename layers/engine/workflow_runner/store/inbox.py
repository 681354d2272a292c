"""Domain events as received (`inbox`) and the tenants seen."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from ..errors import StoreError
from ..fast_init import fast_init
from .sql import Sql, events_params


@fast_init
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
    def from_row(
        cls, row: dict[str, Any], prefix: str = "", tenant_id: str | None = None
    ) -> InboxEvent:
        """From an inbox read's row; `prefix`: the columns' prefix where another read
        joined the inbox row to its own (a stream read's `trigger_`), whose tenant is
        `tenant_id`."""
        return cls(
            tenant_id=row["tenant_id"] if tenant_id is None else tenant_id,
            event_id=row[prefix + "event_id"],
            source=row[prefix + "source"],
            type=row[prefix + "type"],
            detail=row[prefix + "detail"],
            event_time=row[prefix + "event_time"],
            received_at=row[prefix + "received_at"],
            erased_at=row.get(prefix + "erased_at"),
            position=row.get(prefix + "position", 0),
        )


@dataclass(frozen=True)
class CandidateEvent:
    """A stored event a new wait may take (the look-back); `instant`: its EventBridge
    time, else its receive time."""

    event_id: str
    detail: Any
    instant: datetime
    position: int


@dataclass(frozen=True)
class LookBackStart:
    """Where a new wait's look-back starts (InboxStore.lookback_first_pages): the
    run's tenant and id, the awaited type, the equality key its match requires (None:
    none), the (instant, position) the scan continues after, and the event ids a 0.1
    suspension lists as consumed."""

    tenant_id: str
    run_id: str
    type: str
    key: str | None
    after: tuple[datetime, int]
    exclude: Sequence[str]


@dataclass(frozen=True)
class NewInboxEvent:
    """A domain event to store (InboxStore.insert_many); `match_keys`: the keys it
    offers (match.inbox_keys), which the look-back finds it by."""

    tenant_id: str
    event_id: str
    source: str
    type: str
    detail: Any
    event_time: datetime | None
    match_keys: Sequence[str] | None = None


def _keys_of(rows: Callable[[], list[dict[str, Any]]]) -> Callable[[], set[tuple[str, str]]]:
    def keys() -> set[tuple[str, str]]:
        return {(r["tenant_id"], r["event_id"]) for r in rows()}

    return keys


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
        event = NewInboxEvent(tenant_id, event_id, source, type, detail, event_time, match_keys)
        stored = self.insert_many([event], received_at, register_tenants=False)
        return True if not read else bool(stored())

    def insert_many(
        self,
        events: Sequence[NewInboxEvent],
        received_at: datetime,
        register_tenants: bool,
        claim_triggers: bool = False,
    ) -> Callable[[], set[tuple[str, str]]]:
        """Store domain events in one statement (each once: a redelivery changes
        nothing), and with `register_tenants` remember their tenants; sent without
        waiting. Call the returned function after the pipeline: the (tenant, event id)
        of those stored now. With `claim_triggers`, those stored now are stored with
        their triggers claimed (the caller starts their runs in the same transaction;
        `claim_triggers` then claims only events stored before)."""
        rows = [
            {
                "tenant_id": e.tenant_id,
                "event_id": e.event_id,
                "source": e.source,
                "type": e.type,
                "detail": {"v": e.detail},
                "event_time": None if e.event_time is None else e.event_time.isoformat(),
                "match_keys": None if e.match_keys is None else list(e.match_keys),
            }
            for e in events
        ]
        params = {
            "events": Jsonb(rows),
            "now": received_at,
            "register": register_tenants,
            "claim": claim_triggers,
        }
        return _keys_of(self._sql.send("insert_inbox", params))

    def claim_triggers(
        self, events: Sequence[tuple[str, str]], now: datetime
    ) -> Callable[[], set[tuple[str, str]]]:
        """Mark the triggers of events, (tenant, event id) each, as processed, in one
        statement sent without waiting. Call the returned function after the pipeline:
        the events claimed now (the others were claimed before)."""
        params = {**events_params(events), "now": now}
        return _keys_of(self._sql.send("claim_inbox_trigger", params))

    def get(self, tenant_id: str, event_id: str) -> InboxEvent | None:
        row = self._sql.one("get_inbox_event", {"tenant_id": tenant_id, "event_id": event_id})
        return None if row is None else InboxEvent.from_row(row)

    def claim_trigger(self, tenant_id: str, event_id: str, now: datetime) -> bool:
        """Mark the event's triggers as processed; False when they were before."""
        return bool(self.claim_triggers([(tenant_id, event_id)], now)())

    def wakeup_states(self, events: Sequence[tuple[str, str]]) -> list[tuple[datetime, bool]]:
        """Stored awaited events' instants (EventBridge time, else receive time) and
        whether every waiting run has been matched against each already, in the order
        of `events` ((tenant, event id) each), in one statement.

        Raises:
            StoreError: an event is not stored.
        """
        rows = self._sql.all(
            "inbox_wakeup_states",
            events_params(events),
        )
        found = {r["n"]: (r["instant"], bool(r["done"])) for r in rows}
        for n, (tenant_id, event_id) in enumerate(events, 1):
            if n not in found:
                raise StoreError(f"event {event_id} of tenant {tenant_id} is not in the inbox")
        return [found[n] for n in range(1, len(events) + 1)]

    def finish_wakeup(self, events: Sequence[tuple[str, str]], now: datetime) -> None:
        """Record that every waiting run has been matched against the events, (tenant,
        event id) each, in one statement."""
        self._sql.run(
            "finish_inbox_wakeup",
            {**events_params(events), "now": now},
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

    def lookback_first_pages(
        self, waits: Sequence[LookBackStart], limit: int
    ) -> list[list[CandidateEvent]]:
        """The first `limit` rows of each wait's look-back (as `lookback` with its
        start), all in one statement; one list per wait, in order. Call with each
        wait's (tenant, type) lock held (`lock_type`)."""
        pages: list[list[CandidateEvent]] = [[] for _ in waits]
        if not waits:
            return pages
        rows = self._sql.all(
            "lookback_first_pages",
            {
                "waits": Jsonb(
                    [
                        {
                            "n": n,
                            "tenant_id": w.tenant_id,
                            "run_id": w.run_id,
                            "type": w.type,
                            "key": w.key,
                            "after_instant": w.after[0].isoformat(),
                            "after_position": w.after[1],
                            "exclude": list(w.exclude),
                        }
                        for n, w in enumerate(waits)
                    ]
                ),
                "limit": limit,
            },
        )
        for r in rows:
            pages[r["n"]].append(
                CandidateEvent(r["event_id"], r["detail"], r["instant"], r["position"])
            )
        return pages

    def lock_type(self, tenant_id: str, type: str) -> None:
        """Transaction-scoped lock on (tenant, awaited event type): serialises a wakeup
        and the creation of a waiting row, so the two can never miss each other. Inside
        `Store.pipeline()` it goes out with the next statement that is read (before it)."""
        self._sql.run("lock_event_type", {"tenant_id": tenant_id, "type": type})

    def register_tenant(self, tenant_id: str, now: datetime) -> None:
        """Remember a tenant (the due scan starts its cron workflows)."""
        self._sql.run("register_tenant", {"tenant_id": tenant_id, "now": now})

    def tenants(self) -> list[str]:
        """Every known tenant."""
        return [r["tenant_id"] for r in self._sql.all("list_tenants", {})]
