"""Wakeup: an awaited event wakes the waiting runs of its tenant that it matches.

EventWakeup calls `wake_on_event`: the event is stored in the inbox, the first match of
each open wait is recorded on its run stream, and the run's pending row is made due
now; the caller then hands the woken runs to the resume queue (`enqueue.enqueue_due`)
so they resume within a second instead of at the next due-scan tick.

No lost wakeups (invariant 5): the wakeup and the pending projection's creation of a
waiting row take the same advisory lock (tenant, event type); whichever of the two
runs second sees the other's rows (the projection looks back into the inbox).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..definition import DomainEvent
from ..match import matches_safely, payload_keys
from ..store import Store
from ..stream import RUN_STREAM, StepEventMatched
from .ingest import store_inbox_event


@dataclass(frozen=True)
class WokenRun:
    """A waiting run an awaited event (or the projection's look-back) made due."""

    tenant_id: str
    run_id: str
    step_index: int
    event_id: str
    wake_at: datetime


def record_match(
    store: Store,
    tenant_id: str,
    run_id: str,
    step_index: int,
    suspension_version: int,
    event_id: str,
    event_type: str,
    now: datetime,
) -> bool:
    """Record the first matching event of an open wait on the run stream (OCC on the
    suspension's version: a second match, or a run that moved on, appends nothing)."""
    matched = StepEventMatched(
        step_index=step_index,
        event_id=event_id,
        event_type=event_type,
        suspension_version=suspension_version,
    )
    appended = store.streams.append(
        tenant_id, run_id, RUN_STREAM, suspension_version, [matched], now
    )
    if appended:
        store.pending.mark_matched(tenant_id, run_id, suspension_version, event_type, event_id, now)
    return appended


def wake_on_event(store: Store, event: DomainEvent, now: datetime) -> list[WokenRun]:
    """Store an awaited event and wake every waiting run of its tenant that it matches.

    One transaction. The match is recorded on each run's stream and its pending row
    made due now; the caller sends the woken rows to the resume queue. A redelivery
    wakes nothing more.
    """
    with store.transaction():
        with store.pipeline():
            store_inbox_event(store, event, now)
            received_at = store.inbox.claim_wakeup(event.tenant_id, event.id, now)
        if received_at is None:
            return []
        store.inbox.lock_type(event.tenant_id, event.type)
        woken: list[WokenRun] = []
        keys = payload_keys(event.payload)
        for row in store.pending.waiting_for(event.tenant_id, event.type, received_at, keys):
            if not matches_safely(row.match_expr, event.payload):
                continue
            if record_match(
                store,
                event.tenant_id,
                row.run_id,
                row.step_index,
                row.suspension_version,
                event.id,
                event.type,
                now,
            ):
                woken.append(WokenRun(event.tenant_id, row.run_id, row.step_index, event.id, now))
        return woken
