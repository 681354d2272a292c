"""The look-back: a new wait takes an awaited event that arrived before the wait existed.

When the pending projection creates a waiting-for-event row, it looks into the inbox for
a matching event stored before the row existed (invariant 5), under the same (tenant,
type) lock as the wakeup (engine/wakeup.py): whichever of the two runs second sees the
other's part. Events count from the wait's look-back start on, compared with their
instant (EventBridge time, else receive time; see interpreter.waits).

The scan is index-driven: a wait whose match requires an equality atom reads only the
events offering that key (match.equality_key, match.inbox_keys; rows release 0.1.0
stored without keys are read as well), a wait without one reads the type's events in
instant order. And it is bounded: one projection batch examines at most
LOOK_BACK_BUDGET stored events over all its look-backs, so a batch can never outgrow the
function's timeout and be retried from the same checkpoint forever. A look-back that
runs out of budget records where it stopped on its pending row, and the next batches
continue it (`continue_look_backs`). Nothing is lost meanwhile: the row is live, so an
event arriving now is the wakeup's, and the events not scanned yet were stored before
the row existed and stay in the inbox. The first matching event found wins; while a long
look-back is still scanning, a newer event may win through the wakeup first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..match import matches_safely
from ..store import CandidateEvent, LookBackStart, Store, UnfinishedLookBack
from .wakeup import WokenRun, record_match

LOOK_BACK_PAGE = 200
# Stored events one projection batch examines over all its look-backs (at a few tens of
# microseconds each, well under a second).
LOOK_BACK_BUDGET = 5000
# Unfinished look-backs one batch picks up.
UNFINISHED_PER_BATCH = 100

Cursor = tuple[datetime, int]  # (instant, position) the scan continues after


@dataclass
class LookBackBudget:
    """What the look-backs of one projection batch share: the stored events they may
    still examine, and the (tenant, type) locks the batch's transaction holds."""

    rows: int = LOOK_BACK_BUDGET
    locked: set[tuple[str, str]] = field(default_factory=set)

    @property
    def exhausted(self) -> bool:
        return self.rows <= 0

    def lock(self, store: Store, tenant_id: str, event_type: str) -> None:
        """Take the wakeup's (tenant, type) lock before a look-back reads, once a batch:
        it is held until the transaction ends, so the batch's next wait of the type has
        it already (10,000 new waits of one type took 10,000 locks, each a round trip).
        Inside the projection's pipeline the lock goes out with the read after it, in
        that order: nothing of the look-back is read before the lock is held."""
        if (tenant_id, event_type) not in self.locked:
            store.inbox.lock_type(tenant_id, event_type)
            self.locked.add((tenant_id, event_type))


@dataclass(frozen=True)
class AwaitedWait:
    """What a look-back needs of one open wait."""

    tenant_id: str
    run_id: str
    step_index: int
    suspension_version: int
    event_type: str
    match: dict[str, Any] | None
    key: str | None  # the equality key its match requires (match.equality_key)
    consumed_event_ids: Sequence[str]
    match_after: int | None = None  # the stream version its match follows (a migration)

    @classmethod
    def of(cls, row: UnfinishedLookBack) -> AwaitedWait:
        return cls(
            row.tenant_id,
            row.run_id,
            row.step_index,
            row.suspension_version,
            row.wait_event_type,
            row.match_expr,
            row.match_key,
            row.consumed_event_ids,
            row.match_after,
        )


@dataclass(frozen=True)
class ReadAhead:
    """A look-back's first rows, read before its turn with the batch's other new waits
    (InboxStore.lookback_first_pages): `rows`, at most `limit` of them."""

    rows: Sequence[CandidateEvent]
    limit: int


def scan(
    store: Store,
    wait: AwaitedWait,
    after: Cursor,
    budget: LookBackBudget,
    first: ReadAhead | None = None,
) -> tuple[CandidateEvent | None, Cursor | None]:
    """Look for the first stored event after `after` the wait accepts, within the budget.

    `first`: its first rows, read ahead from `after` (a page of that many, or fewer
    when the budget has less left: the rows are in scan order, so the first of them are
    what a read of fewer returns).

    Returns:
        (the event, None) when one matches; (None, None) when every candidate was
        examined; (None, where to continue) when the budget ran out first.
    """
    while not budget.exhausted:
        if first is not None:
            page = min(first.limit, budget.rows)
            rows = list(first.rows[:page])
            first = None
        else:
            page = min(LOOK_BACK_PAGE, budget.rows)
            rows = store.inbox.lookback(
                wait.tenant_id,
                wait.run_id,
                wait.event_type,
                wait.key,
                after,
                wait.consumed_event_ids,
                page,
            )
        budget.rows -= len(rows)
        for row in rows:
            if matches_safely(wait.match, row.detail):
                return row, None
        if len(rows) < page:
            return None, None
        after = (rows[-1].instant, rows[-1].position)
    return None, after


def read_ahead(
    store: Store, starts: Sequence[tuple[AwaitedWait, Cursor]], budget: LookBackBudget
) -> list[ReadAhead | None]:
    """The first rows of several new waits' look-backs, in one round trip: each
    (tenant, type) lock taken first (in sorted order), then one read of every wait's
    first page. A page is LOOK_BACK_PAGE rows, or the budget's share when the waits are
    many, so the read stays within what the batch may examine; a wait whose share runs
    out goes on reading at its turn (`scan`). None for each when the budget is spent,
    or when there is one wait: its own read at its turn is planned for its cursor, the
    read of many for cursors it cannot see."""
    if len(starts) < 2 or budget.exhausted:
        return [None] * len(starts)
    for tenant_id, event_type in sorted({(w.tenant_id, w.event_type) for w, _ in starts}):
        budget.lock(store, tenant_id, event_type)
    limit = max(1, min(LOOK_BACK_PAGE, budget.rows // len(starts)))
    pages = store.inbox.lookback_first_pages(
        [
            LookBackStart(w.tenant_id, w.run_id, w.event_type, w.key, after, w.consumed_event_ids)
            for w, after in starts
        ],
        limit,
    )
    return [ReadAhead(rows, limit) for rows in pages]


def take(store: Store, wait: AwaitedWait, event_id: str, now: datetime) -> WokenRun | None:
    """Record the event a look-back found as the wait's match (None: the run moved on)."""
    if record_match(
        store,
        wait.tenant_id,
        wait.run_id,
        wait.step_index,
        wait.suspension_version,
        event_id,
        wait.event_type,
        now,
        wait.match_after,
    ):
        return WokenRun(wait.tenant_id, wait.run_id, wait.step_index, event_id, now)
    return None


def continue_look_backs(
    store: Store, now: datetime, budget: LookBackBudget
) -> tuple[list[WokenRun], bool]:
    """Go on with look-backs earlier batches left unfinished, within the budget.

    Call inside the projection's transaction. Returns the waits woken, and whether
    unfinished look-backs remain.
    """
    woken: list[WokenRun] = []
    if budget.exhausted:
        return woken, bool(store.pending.unfinished_lookbacks(1))
    rows = store.pending.unfinished_lookbacks(UNFINISHED_PER_BATCH)
    remaining = len(rows) == UNFINISHED_PER_BATCH
    for row in rows:
        if budget.exhausted:
            return woken, True
        wait = AwaitedWait.of(row)
        budget.lock(store, wait.tenant_id, wait.event_type)
        found, cursor = scan(store, wait, row.after, budget)
        hit = take(store, wait, found.event_id, now) if found is not None else None
        if hit is not None:
            woken.append(hit)  # marking the row matched ended its look-back
            continue
        store.pending.set_lookback(wait.tenant_id, wait.run_id, wait.suspension_version, cursor)
        remaining = remaining or cursor is not None
    return woken, remaining
