"""Wakeup: awaited events wake the waiting runs of their tenant that they match.

EventWakeup calls `wake_and_enqueue_many` with the awaited events of one SQS batch
(`wake_and_enqueue` is its batch of one), one operation that is safe to run again whole:

1. The events are stored in the inbox, all in one transaction (a redelivery changes
   nothing).
2. For each distinct (tenant, type) of the batch, in sorted order, one transaction
   takes that lock and reads the tenant's waits of that type that may take each of the
   group's events. Python matches them in batch order: a wait an earlier event of the
   batch takes is not offered to a later one (which goes on to the other waits, or
   matches nothing), exactly as separate calls in that order would behave. One lock per
   transaction: the pending projection takes several of these locks in its own order,
   so holding two at once could deadlock with it.
3. The matches are recorded in chunks of WAKE_CHUNK runs, all events and tenants of the
   batch together: each chunk is one transaction of set-based statements (per tenant,
   the `workflow.step.event-matched` appends with optimistic concurrency per run, in run
   order, and the pending rows made due now). One event matching 50,000 waits therefore
   costs a small constant per run, and the work can stop between chunks when its time
   budget ends: what is recorded stays recorded, and a retry continues with the waits
   still unmatched (never with a run that already consumed the event).
4. Once every wait was examined for an event, its inbox row says so (`woken_at`;
   committed with the chunk that holds its last match): a redelivery matches nothing
   more.
5. Every row the batch's events matched whose lease is free is leased and sent to the
   resume queue (`enqueue.enqueue_matched`, one transaction and one send for the batch
   up to LEASE_CHUNK rows). That is read from the database, not taken from what this
   call matched, so an invocation that committed its matches and then died, or never
   got the acknowledgement of its commit, is finished by its retry.

Events of different tenants share transactions, never statements: every read, append
and mark names one tenant.

No lost wakeups (invariant 5): the read of step 2 and the pending projection's creation
of a waiting row (with its look-back, engine/lookback.py) take the same advisory lock
(tenant, event type), and the events are committed (step 1) before that lock is taken:
whichever of the two runs second sees the other's part.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import groupby

from ..definition import DomainEvent
from ..match import matches_safely, payload_keys
from ..ports import ResumeQueue
from ..store import Store, WaitingRow
from ..stream import RUN_STREAM, StepEventMatched
from .enqueue import DEFAULT_LEASE_SECONDS, enqueue_matched
from .inbox_writes import store_inbox_events

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


@dataclass(frozen=True)
class EventMatches:
    """One event of a batch: the waits it matched, and whether every wait was examined
    (False: the time budget ended first)."""

    event: DomainEvent
    woken: list[WokenRun] = field(default_factory=list)
    examined: bool = True


@dataclass(frozen=True)
class WakeupBatch:
    """What `wake_and_enqueue_many` did: per event, in the batch's order, its matches;
    the requests sent for the whole batch (which may include runs an earlier attempt
    matched); and whether every match was enqueued."""

    events: list[EventMatches]
    enqueued: int = 0
    refused: int = 0
    enqueued_all: bool = True

    def complete(self, index: int) -> bool:
        """Whether event `index` needs no retry: every wait examined, every match sent."""
        return self.events[index].examined and self.enqueued_all


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


Hit = tuple[DomainEvent, WaitingRow]


def _record_matches(store: Store, hits: Sequence[Hit], now: datetime) -> list[WokenRun]:
    """Record events on their waits (call inside a transaction): per tenant, one append
    statement over its runs in run order (concurrent wakeups over overlapping runs wait
    for each other in the same order, never in a cycle), then one mark of their rows."""
    woken: list[WokenRun] = []
    for tenant_id in sorted({event.tenant_id for event, _ in hits}):
        mine = sorted((h for h in hits if h[0].tenant_id == tenant_id), key=lambda h: h[1].run_id)
        appended = store.streams.append_to_many(
            tenant_id,
            RUN_STREAM,
            [
                (
                    w.run_id,
                    w.match_after,
                    StepEventMatched(
                        step_index=w.step_index,
                        event_id=e.id,
                        event_type=e.type,
                        suspension_version=w.suspension_version,
                    ),
                )
                for e, w in mine
            ],
            now,
        )
        in_run_order = [h for h in mine if h[1].run_id in appended]
        if in_run_order:
            store.pending.mark_matched_many(
                tenant_id,
                [(w.run_id, w.suspension_version, e.type, e.id) for e, w in in_run_order],
                now,
            )
        won = sorted(in_run_order, key=lambda h: h[0].id)
        woken += [WokenRun(tenant_id, w.run_id, w.step_index, e.id, now) for e, w in won]
    return woken


def _open_events(
    store: Store, events: Sequence[DomainEvent], now: datetime
) -> list[tuple[DomainEvent, datetime]]:
    """Step 1: store the events in one transaction; those not matched against every
    wait yet, with their instant.

    An event this insert stored is open, and its instant is what the insert wrote
    (its time, else `now`), so only the others (redeliveries, or an event another
    delivery stored first) have their state read back: a second statement only when
    the batch holds one."""
    with store.transaction():
        stored_now = store_inbox_events(store, events, now)()
        instants = {
            (e.tenant_id, e.id): instant
            for e in events
            if (e.tenant_id, e.id) in stored_now
            and (instant := _stored_instant(e, now)) is not None
        }
        others = [(e.tenant_id, e.id) for e in events if (e.tenant_id, e.id) not in instants]
        if others:
            for key, (instant, done) in zip(others, store.inbox.wakeup_states(others), strict=True):
                if not done:
                    instants[key] = instant
    return [(e, instants[(e.tenant_id, e.id)]) for e in events if (e.tenant_id, e.id) in instants]


def _stored_instant(event: DomainEvent, now: datetime) -> datetime | None:
    """The instant the inbox gives an event stored at `now` (`coalesce(event_time,
    received_at)`), or None where the database's reading of a time without a zone
    would decide it (then the stored row is read instead): naive as Python defines it,
    no tzinfo or one that gives no offset."""
    instant = event.time if event.time is not None else now
    return instant if instant.utcoffset() is not None else None


def _waits_for(
    store: Store, events: Sequence[tuple[DomainEvent, datetime]]
) -> dict[tuple[str, str], list[WaitingRow]]:
    """Step 2's reads: per (tenant, event id), the waits that may take it, each (tenant, type)
    group under its lock in a transaction of its own, the groups in sorted order."""
    waits: dict[tuple[str, str], list[WaitingRow]] = {}
    for (tenant_id, type), group in groupby(
        sorted(events, key=lambda e: (e[0].tenant_id, e[0].type)),
        key=lambda e: (e[0].tenant_id, e[0].type),
    ):
        events_of = list(group)
        with store.transaction():
            found = store.pending.locked_waiting_for(
                tenant_id,
                type,
                [(instant, payload_keys(e.payload), e.id) for e, instant in events_of],
            )
        for (event, _), rows in zip(events_of, found, strict=True):
            waits[(tenant_id, event.id)] = rows
    return waits


def match_events(
    store: Store,
    events: Sequence[DomainEvent],
    now: datetime,
    chunk: int = WAKE_CHUNK,
    out_of_time: Callable[[], bool] = lambda: False,
) -> list[EventMatches]:
    """Store awaited events and record each on the open waits of its tenant it matches.

    Steps 1 to 4 of the module docstring, for events of distinct (tenant, id). Returns
    one EventMatches per event, in order (`examined` False: `out_of_time` said so
    between two chunks before that event's last match was recorded).
    """
    opened = _open_events(store, events, now)
    waits = _waits_for(store, opened)
    # Batch order decides: a run an earlier event takes is no longer open for a later one.
    taken: set[tuple[str, str]] = set()
    plans: list[list[Hit]] = []
    for event, _ in opened:
        plan: list[Hit] = []
        for w in waits[(event.tenant_id, event.id)]:
            if (event.tenant_id, w.run_id) not in taken and matches_safely(
                w.match_expr, event.payload
            ):
                taken.add((event.tenant_id, w.run_id))
                plan.append((event, w))
        plans.append(plan)
    # Who wins is decided; record the events with the fewest matches first, so as many
    # as possible are finished before the time budget ends (the first chunk finishes
    # every event that matched nothing).
    hits: list[Hit] = []
    ends: list[tuple[DomainEvent, int]] = []  # each open event, and where its hits end
    for (event, _), plan in sorted(zip(opened, plans, strict=True), key=lambda p: len(p[1])):
        hits += plan
        ends.append((event, len(hits)))
    woken: dict[tuple[str, str], list[WokenRun]] = {}
    finished = 0
    start = 0
    while finished < len(ends):
        if start and out_of_time():
            break
        stop = min(start + chunk, len(hits))
        with store.transaction(), store.pipeline():
            for run in _record_matches(store, hits[start:stop], now):
                woken.setdefault((run.tenant_id, run.event_id), []).append(run)
            # An event whose last match is in this chunk is finished with it (step 4).
            done = finished
            while finished < len(ends) and ends[finished][1] <= stop:
                finished += 1
            if finished > done:
                store.inbox.finish_wakeup(
                    [(event.tenant_id, event.id) for event, _ in ends[done:finished]], now
                )
        start = stop
    left = {(e.tenant_id, e.id) for e, _ in ends[finished:]}
    return [
        EventMatches(e, woken.get((e.tenant_id, e.id), []), (e.tenant_id, e.id) not in left)
        for e in events
    ]


def wake_on_event(store: Store, event: DomainEvent, now: datetime) -> list[WokenRun]:
    """Store an awaited event and wake every waiting run of its tenant that it matches
    (without a time budget; the caller enqueues). A redelivery wakes nothing more."""
    return match_events(store, [event], now)[0].woken


def wake_and_enqueue_many(
    store: Store,
    queue: ResumeQueue,
    events: Sequence[DomainEvent],
    now: datetime,
    lease_seconds: int = DEFAULT_LEASE_SECONDS,
    budget_seconds: float | None = None,
    chunk: int = WAKE_CHUNK,
    monotonic: Callable[[], float] = time.monotonic,
) -> WakeupBatch:
    """EventWakeup's operation: match a batch of awaited events, then enqueue what they
    matched, in one set of transactions (see the module docstring).

    Safe to run again whole, or event by event (a retry after a crash, a lost commit
    acknowledgement, a redelivery). An event the batch holds twice is handled once.

    Args:
        store: the database.
        queue: the resume queue.
        events: the awaited events, of any tenants; earlier ones win a wait two match.
        now: business time.
        lease_seconds: how long an enqueued row is not handed out again.
        budget_seconds: record no further chunk of matches, and lease no further chunk
            of matched rows, after this long (None: no limit).
        chunk: waits recorded per transaction.
        monotonic: time source for the budget.

    Returns:
        A WakeupBatch; `complete(i)` False means event i has waits left to match, or
        the batch matched runs left to enqueue, and running it again continues.
    """
    started = monotonic()

    def out_of_time() -> bool:
        return budget_seconds is not None and monotonic() - started >= budget_seconds

    distinct = list({(e.tenant_id, e.id): e for e in reversed(events)}.values())[::-1]
    matched = {
        (m.event.tenant_id, m.event.id): m
        for m in match_events(store, distinct, now, chunk, out_of_time)
    }
    by_tenant: dict[str, list[str]] = {}
    for e in distinct:
        by_tenant.setdefault(e.tenant_id, []).append(e.id)
    enqueued = enqueue_matched(store, queue, by_tenant, now, lease_seconds, out_of_time)
    # A duplicate reports the first copy's work (a second call would have found it done).
    seen: set[tuple[str, str]] = set()
    results = []
    for e in events:
        first = matched[(e.tenant_id, e.id)]
        key = (e.tenant_id, e.id)
        results.append(first if key not in seen else EventMatches(e, [], first.examined))
        seen.add(key)
    return WakeupBatch(results, enqueued.sent, enqueued.refused, enqueued.complete)


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
    """One awaited event: `wake_and_enqueue_many` with a batch of one (same arguments).

    Returns:
        A WakeupResult; `complete` False means waits are left to match, or matched runs
        to enqueue, and running it again continues.
    """
    batch = wake_and_enqueue_many(
        store, queue, [event], now, lease_seconds, budget_seconds, chunk, monotonic
    )
    return WakeupResult(
        event.id, batch.events[0].woken, batch.enqueued, batch.refused, batch.complete(0)
    )
