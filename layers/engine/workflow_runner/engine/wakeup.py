"""Wakeup: an awaited event wakes the waiting runs of its tenant that it matches.

EventWakeup calls `wake_and_enqueue`, one operation that is safe to run again whole:

1. The event is stored in the inbox (a redelivery changes nothing).
2. The tenant's waits of its type that may take it are read under the (tenant, type)
   lock, matched in Python, and the matches recorded in chunks of WAKE_CHUNK runs: each
   chunk is one transaction of two set-based statements (the `workflow.step.event-matched`
   appends, with optimistic concurrency per run, and the pending rows made due now). One
   event matching 50,000 waits therefore costs a small constant per run, and the work
   can stop between chunks when its time budget ends: what is recorded stays recorded,
   and a retry continues with the waits still unmatched (never with a run that already
   consumed the event).
3. Once every wait was examined, the inbox row says so (`woken_at`; committed with
   the last chunk of matches): a redelivery matches nothing more.
4. Every row the event matched whose lease is free is leased and sent to the resume
   queue (`enqueue.enqueue_matched`). That is read from the database, not taken from
   what this call matched, so an invocation that committed its matches and then died,
   or never got the acknowledgement of its commit, is finished by its retry.

No lost wakeups (invariant 5): the read of step 2 and the pending projection's creation
of a waiting row (with its look-back, engine/lookback.py) take the same advisory lock
(tenant, event type), and the event is committed before that lock is taken: whichever
of the two runs second sees the other's part.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ..definition import DomainEvent
from ..match import matches_safely, payload_keys
from ..ports import ResumeQueue
from ..store import Store, WaitingRow
from ..stream import RUN_STREAM, StepEventMatched
from .enqueue import DEFAULT_LEASE_SECONDS, enqueue_matched
from .inbox_writes import store_inbox_event

# Waits recorded per transaction: a few hundred milliseconds of work at most.
WAKE_CHUNK = 1000


@dataclass(frozen=True)
class WokenRun:
    """A waiting run an awaited event (or the projection's look-back) made due."""

    tenant_id: str
    run_id: str
    step_index: int
    event_id: str
    wake_at: datetime


@dataclass(frozen=True)
class WakeupResult:
    """What `wake_and_enqueue` did: the waits it matched, the requests it sent (which
    may include runs an earlier attempt matched), and whether every wait was examined
    and every match enqueued (False: the time budget ended first; running it again
    continues)."""

    event_id: str
    woken: list[WokenRun] = field(default_factory=list)
    enqueued: int = 0
    refused: int = 0
    complete: bool = True

    @property
    def matched(self) -> int:
        return len(self.woken)


def record_match(
    store: Store,
    tenant_id: str,
    run_id: str,
    step_index: int,
    suspension_version: int,
    event_id: str,
    event_type: str,
    now: datetime,
    match_after: int | None = None,
) -> bool:
    """Record the first matching event of an open wait on the run stream (OCC on the
    suspension's version, or `match_after` when a migration moved the run since: a
    second match, or a run that moved on, appends nothing)."""
    matched = StepEventMatched(
        step_index=step_index,
        event_id=event_id,
        event_type=event_type,
        suspension_version=suspension_version,
    )
    after = suspension_version if match_after is None else match_after
    appended = store.streams.append(tenant_id, run_id, RUN_STREAM, after, [matched], now)
    if appended:
        store.pending.mark_matched(tenant_id, run_id, suspension_version, event_type, event_id, now)
    return appended


def _record_matches(
    store: Store, event: DomainEvent, waits: Sequence[WaitingRow], now: datetime
) -> list[WokenRun]:
    """Record the event on many waits at once (call inside a transaction)."""
    appended = store.streams.append_to_many(
        event.tenant_id,
        RUN_STREAM,
        [
            (
                w.run_id,
                w.match_after,
                StepEventMatched(
                    step_index=w.step_index,
                    event_id=event.id,
                    event_type=event.type,
                    suspension_version=w.suspension_version,
                ),
            )
            for w in waits
        ],
        now,
    )
    won = [w for w in waits if w.run_id in appended]
    if won:
        store.pending.mark_matched_many(
            event.tenant_id,
            [(w.run_id, w.suspension_version) for w in won],
            event.type,
            event.id,
            now,
        )
    return [WokenRun(event.tenant_id, w.run_id, w.step_index, event.id, now) for w in won]


def match_event(
    store: Store,
    event: DomainEvent,
    now: datetime,
    chunk: int = WAKE_CHUNK,
    out_of_time: Callable[[], bool] = lambda: False,
) -> tuple[list[WokenRun], bool]:
    """Store an awaited event and record it on every open wait of its tenant it matches.

    Steps 1 to 3 of the module docstring. Returns the waits this call woke, and whether
    every wait was examined (False when `out_of_time` said so between two chunks).
    """
    with store.transaction(), store.pipeline():
        store_inbox_event(store, event, now)
        instant, done = store.inbox.wakeup_state(event.tenant_id, event.id)
    if done:
        return [], True
    with store.transaction():
        store.inbox.lock_type(event.tenant_id, event.type)
        waiting = store.pending.waiting_for(
            event.tenant_id, event.type, instant, payload_keys(event.payload), event.id
        )
    # Sorted by run id (the query's order): concurrent broadcasts append to overlapping
    # runs in the same order, so they wait for each other but never deadlock.
    hits = [w for w in waiting if matches_safely(w.match_expr, event.payload)]
    woken: list[WokenRun] = []
    for start in range(0, len(hits), chunk):
        if start and out_of_time():
            return woken, False
        with store.transaction():
            woken += _record_matches(store, event, hits[start : start + chunk], now)
            if start + chunk >= len(hits):  # the last chunk commits step 3 with it
                store.inbox.finish_wakeup(event.tenant_id, event.id, now)
    if not hits:
        store.inbox.finish_wakeup(event.tenant_id, event.id, now)
    return woken, True


def wake_on_event(store: Store, event: DomainEvent, now: datetime) -> list[WokenRun]:
    """Store an awaited event and wake every waiting run of its tenant that it matches
    (without a time budget; the caller enqueues). A redelivery wakes nothing more."""
    return match_event(store, event, now)[0]


def wake_and_enqueue(
    store: Store,
    queue: ResumeQueue,
    event: DomainEvent,
    now: datetime,
    lease_seconds: int = DEFAULT_LEASE_SECONDS,
    budget_seconds: float | None = None,
    chunk: int = WAKE_CHUNK,
    monotonic: Callable[[], float] = time.monotonic,
) -> WakeupResult:
    """EventWakeup's operation: match an awaited event, then enqueue what it matched.

    Safe to run again whole (a retry after a crash, a lost commit acknowledgement, a
    redelivery): see the module docstring.

    Args:
        store: the database.
        queue: the resume queue.
        event: the awaited event.
        now: business time.
        lease_seconds: how long an enqueued row is not handed out again.
        budget_seconds: record no further chunk of matches, and lease no further chunk
            of matched rows, after this long (None: no limit).
        chunk: waits recorded per transaction.
        monotonic: time source for the budget.

    Returns:
        A WakeupResult; `complete` False means waits are left to match, or matched runs
        to enqueue, and running it again continues.
    """
    started = monotonic()

    def out_of_time() -> bool:
        return budget_seconds is not None and monotonic() - started >= budget_seconds

    woken, matched_all = match_event(store, event, now, chunk, out_of_time)
    enqueued = enqueue_matched(
        store, queue, event.tenant_id, event.id, now, lease_seconds, out_of_time
    )
    complete = matched_all and enqueued.complete
    return WakeupResult(event.id, woken, enqueued.sent, enqueued.refused, complete)
