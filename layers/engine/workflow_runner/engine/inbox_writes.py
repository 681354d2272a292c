"""Domain events into the inbox: one statement for a batch, a redelivery changes
nothing, each with the keys it offers so a wait created later finds it by index (the
look-back, engine/lookback.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from ..definition import DomainEvent
from ..match import inbox_keys
from ..store import NewInboxEvent, Store


def store_inbox_events(
    store: Store, events: Sequence[DomainEvent], now: datetime, claim_triggers: bool = False
) -> Callable[[], set[tuple[str, str]]]:
    """Store domain events (a redelivery changes nothing) and remember their tenants, in
    one statement sent without waiting; the returned function (after the pipeline)
    gives the (tenant, event id) stored now. With `claim_triggers` those stored now are
    stored with their triggers claimed (InboxStore.insert_many).

    With each go the keys it offers, so a wait created later finds it by index (the
    look-back, engine/projection.py)."""
    rows = [
        NewInboxEvent(
            e.tenant_id,
            e.id,
            e.source,
            e.type,
            e.payload,
            e.time,
            inbox_keys(e.payload),
        )
        for e in events
    ]
    return store.inbox.insert_many(rows, now, register_tenants=True, claim_triggers=claim_triggers)


def store_inbox_event(store: Store, event: DomainEvent, now: datetime) -> None:
    """Store one domain event (see store_inbox_events)."""
    store_inbox_events(store, [event], now)
