"""The pending projection: `workflow_run_pending` caught up with the run streams.

PendingProjection calls `project_pending` after a nudge and on a schedule. It reads
`wf_events` in commit order (see read_events_after in store/queries.sql) and, in the
same transaction as its writes, advances its checkpoint, so every event is applied
exactly once: a suspension upserts the run's row, a match marks it due, a resume or a
terminal event deletes it, a migration moves it. Because it is a projection, the table
can be dropped and rebuilt from the streams at any time (invariant 1).

When it creates a waiting-for-event row it looks back into the inbox for an event that
arrived before the row existed (invariant 5, engine/lookback.py), under the same lock as
the wakeup; the look-backs of one batch share a budget, and one that runs out of it is
continued by the next batches.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from ..match import equality_key
from ..store import DueRow, NewPendingRow, PendingMark, ProjectionLag, Store, StoredEvent
from ..stream import (
    CALLBACK_EVENT_TYPE,
    RUN_STREAM,
    SUSPENDING_FACTS,
    TERMINAL_TYPES,
    CallbackCompleted,
    CallbackFailed,
    CallbackHeartbeat,
    ChildrenSettled,
    FlowHeld,
    RetryScheduled,
    RunMigrated,
    StepEventMatched,
    StepResumed,
    StepWaiting,
    StepWaitingForCallback,
    StepWaitingForCondition,
    StepWaitingForEvent,
    Suspension,
    TaskCompleted,
    TaskFailed,
)
from .joins import CHILDREN_OUTCOME
from .lookback import (
    AwaitedWait,
    Cursor,
    LookBackBudget,
    ReadAhead,
    continue_look_backs,
    read_ahead,
    scan,
    take,
)
from .wakeup import WokenRun

PENDING_PROJECTION = "workflow_run_pending"
# What a pending row of a task suspension records in trigger_event_type once the task's
# outcome is recorded (awaited_event_id then holds the task id).
TASK_OUTCOME = "workflow.task"


def floor_second(moment: datetime) -> datetime:
    """A look-back's start in whole seconds: awaited events' instants are EventBridge
    times, so an event of the same second counts as after it (suspensions written by
    release 0.1.0 carry a run start with milliseconds, on the trigger function's clock)."""
    return moment.replace(microsecond=0)


@dataclass(frozen=True)
class ProjectionResult:
    """What a catch-up applied; `woken`: waits an already-stored event satisfied;
    `due_soon`: new suspensions due within the horizon asked for (to enqueue now,
    delayed, instead of waiting for the next due-scan tick)."""

    applied: int
    woken: list[WokenRun] = field(default_factory=list)
    due_soon: list[DueRow] = field(default_factory=list)
    lag_events: int = 0  # run-stream events still to apply after this catch-up
    lag_seconds: float = 0.0  # age of the oldest of them (business time)


class _PendingWrites:
    """The projection's plain writes of a batch, sent as one statement of each kind:
    the runs whose rows go (a resume, a run's end), the suspensions' new rows, and the
    awaited events (or outcomes) recorded on waiting rows.

    Applied in event order they would be one statement each. Deferred, a delete
    supersedes the run's earlier rows and mark still waiting (they would be deleted),
    and at a flush the deletes go before the rows, which all came after them; a mark
    waits only while nothing else of its run comes (a run's row or second mark after it
    flushes first), so the marks can go last. The result is the same. Any other write
    of a run with a deferred write (a migration, a wait's look-back) flushes first, and
    so does the end of the batch.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.deletes: dict[tuple[str, str], None] = {}
        # (tenant, run) -> step -> row: a later suspension of the same step replaces it.
        self.rows: dict[tuple[str, str], dict[int, NewPendingRow]] = {}
        self.marks: dict[tuple[str, str], PendingMark] = {}

    def delete(self, tenant_id: str, run_id: str) -> None:
        self.rows.pop((tenant_id, run_id), None)
        self.marks.pop((tenant_id, run_id), None)
        self.deletes[(tenant_id, run_id)] = None

    def upsert(self, row: NewPendingRow) -> None:
        if (row.tenant_id, row.run_id) in self.marks:
            self.flush()
        steps = self.rows.setdefault((row.tenant_id, row.run_id), {})
        earlier = steps.get(row.step_index)
        if earlier is None or earlier.suspension_version <= row.suspension_version:
            steps[row.step_index] = row

    def mark(self, mark: PendingMark) -> None:
        self.before_write(mark.tenant_id, mark.run_id)
        self.marks[(mark.tenant_id, mark.run_id)] = mark

    def before_write(self, tenant_id: str, run_id: str) -> None:
        run = (tenant_id, run_id)
        if run in self.deletes or run in self.rows or run in self.marks:
            self.flush()

    def flush(self) -> None:
        if self.deletes:
            self.store.pending.delete_runs(list(self.deletes))
            self.deletes.clear()
        if self.rows:
            self.store.pending.upsert_many([r for s in self.rows.values() for r in s.values()])
            self.rows.clear()
        if self.marks:
            self.store.pending.mark_matched_rows(list(self.marks.values()))
            self.marks.clear()


def _pending_row(
    e: StoredEvent,
    fact: Suspension | StepWaitingForCallback | StepWaitingForCondition | FlowHeld,
    lookback_after: Cursor | None = None,
) -> NewPendingRow:
    wait = fact if isinstance(fact, StepWaitingForEvent) else None
    return NewPendingRow(
        tenant_id=e.tenant_id,
        run_id=e.stream_id,
        step_index=fact.step_index,
        workflow_name=fact.workflow_name,
        suspension_event_type=e.type,
        wake_at=fact.due_at,
        retry_attempt=fact.attempt if isinstance(fact, RetryScheduled) else None,
        definition_fingerprint=fact.definition_fingerprint or None,
        wait_event_type=wait.event_type if wait else None,
        match_expr=wait.match if wait else None,
        suspension_version=e.version,
        lookback_from=floor_second(wait.lookback_from) if wait and wait.lookback_from else None,
        match_key=equality_key(wait.match) if wait else None,
        consumed_event_ids=(wait.consumed_event_ids or ()) if wait else (),
        lookback_after=lookback_after,
    )


def _awaited(e: StoredEvent, fact: StepWaitingForEvent) -> tuple[AwaitedWait, Cursor]:
    """A new wait, and where its look-back starts: (start, 0), every event whose instant
    is not before the look-back start."""
    wait = AwaitedWait(
        e.tenant_id,
        e.stream_id,
        fact.step_index,
        e.version,
        fact.event_type,
        fact.match,
        equality_key(fact.match),
        fact.consumed_event_ids or (),
    )
    return wait, (floor_second(fact.lookback_from or e.recorded_at), 0)


# A batch's new waits, by (tenant, run, suspension version): their look-backs' first
# rows, read together before the batch is applied (lookback.read_ahead).
ReadAheads = dict[tuple[str, str, int], ReadAhead | None]


def _read_ahead(store: Store, events: list[StoredEvent], budget: LookBackBudget) -> ReadAheads:
    """The first rows of the look-backs of the batch's new waits, in one round trip
    after their locks, instead of one round trip per wait at its turn (10,000 new waits
    of one type took 10,000). Reading them before the waits' rows are written misses
    nothing: the locks are held from here to the commit, so an event stored since
    wakes the row through the wakeup, which reads the waits after this commits."""
    waits = [
        (e, fact)
        for e in events
        if e.stream_type == RUN_STREAM
        and e.type == StepWaitingForEvent.TYPE
        and isinstance(fact := e.fact, StepWaitingForEvent)
    ]
    pages = read_ahead(store, [_awaited(e, fact) for e, fact in waits], budget)
    return {
        (e.tenant_id, e.stream_id, e.version): p for (e, _), p in zip(waits, pages, strict=True)
    }


def _new_wait(
    store: Store,
    e: StoredEvent,
    fact: StepWaitingForEvent,
    now: datetime,
    budget: LookBackBudget,
    ahead: ReadAheads,
) -> WokenRun | None:
    """Write a new wait's row, looking back for an event that came before it."""
    wait, start = _awaited(e, fact)
    budget.lock(store, e.tenant_id, fact.event_type)
    first = ahead.pop((e.tenant_id, e.stream_id, e.version), None)
    found, cursor = scan(store, wait, start, budget, first)
    store.pending.upsert(_pending_row(e, fact, cursor))
    return take(store, wait, found.event_id, now) if found is not None else None


# Where the look-back of a wait that recorded no start (release 0.1.0) begins.
_ANY_TIME = datetime(1970, 1, 1, tzinfo=UTC)


def _migrated(
    store: Store, e: StoredEvent, fact: RunMigrated, now: datetime, budget: LookBackBudget
) -> WokenRun | None:
    """Move a migrated run's row with its suspension. An unmatched wait looks back
    again: a matching event whose wakeup lost its append to the migration (the stream
    had moved past the suspension) is taken now, under the wakeup's lock as a new
    wait's look-back is; the ones that come later are appended after this event."""
    moved = store.pending.migrate(
        e.tenant_id,
        e.stream_id,
        fact.suspension_version,
        fact.to_step_index,
        fact.to_fingerprint,
        e.version,
    )
    if moved is None or moved.matched or moved.wait_event_type is None:
        return None
    wait = AwaitedWait(
        e.tenant_id,
        e.stream_id,
        moved.step_index,
        moved.suspension_version,
        moved.wait_event_type,
        moved.match_expr,
        moved.match_key,
        moved.consumed_event_ids,
        e.version,
    )
    budget.lock(store, e.tenant_id, wait.event_type)
    found, cursor = scan(store, wait, (moved.lookback_from or _ANY_TIME, 0), budget)
    store.pending.set_lookback(e.tenant_id, e.stream_id, moved.suspension_version, cursor)
    return take(store, wait, found.event_id, now) if found is not None else None


# The event types whose payload the projection reads: the suspensions and what marks a
# row due. A resume and a run's end drop the row by type alone, and the other events
# (run starts, dispatches, task attempts) leave it as it is. Not decoding them took a
# third off a catch-up's Python in a backlog of resumes.
_READS_PAYLOAD = frozenset(
    cls.TYPE
    for cls in (
        *SUSPENDING_FACTS,
        StepEventMatched,
        CallbackCompleted,
        CallbackFailed,
        CallbackHeartbeat,
        TaskCompleted,
        TaskFailed,
        ChildrenSettled,
        RunMigrated,
    )
)
_DROPS_ROW = frozenset({StepResumed.TYPE, *TERMINAL_TYPES})
# The suspensions with a time of their own (what `horizon_seconds` returns when due soon).
_TIMED_SUSPENSIONS = (
    StepWaiting,
    StepWaitingForEvent,
    RetryScheduled,
    StepWaitingForCallback,
    StepWaitingForCondition,
    FlowHeld,  # a run held for its throttle turn or its debounce's quiet period
)
_TIMED = frozenset(cls.TYPE for cls in _TIMED_SUSPENSIONS)


def _apply(
    store: Store,
    e: StoredEvent,
    now: datetime,
    writes: _PendingWrites,
    budget: LookBackBudget,
    ahead: ReadAheads,
) -> WokenRun | None:
    if e.type not in _READS_PAYLOAD:
        if e.type in _DROPS_ROW:
            writes.delete(e.tenant_id, e.stream_id)
        return None
    fact = e.fact
    if isinstance(fact, SUSPENDING_FACTS):  # each writes its run's row
        if isinstance(fact, StepWaitingForEvent):
            writes.before_write(e.tenant_id, e.stream_id)
            return _new_wait(store, e, fact, now, budget, ahead)
        writes.upsert(_pending_row(e, fact))
    elif isinstance(fact, StepEventMatched):
        writes.mark(
            PendingMark(
                e.tenant_id,
                e.stream_id,
                fact.suspension_version,
                fact.event_type,
                fact.event_id,
                e.recorded_at,
            )
        )
    elif isinstance(fact, CallbackHeartbeat) and fact.run_due:
        # As the heartbeat itself did; this is the path of a row projected after it.
        writes.before_write(e.tenant_id, e.stream_id)
        store.pending.extend_wake(e.tenant_id, e.stream_id, fact.suspension_version, fact.deadline)
    elif isinstance(fact, (CallbackCompleted, CallbackFailed)) and fact.run_due:
        # The answer marks the row and enqueues the resume itself; this is the path of a
        # row projected after the answer, or of a rebuilt projection.
        writes.mark(
            PendingMark(
                e.tenant_id,
                e.stream_id,
                fact.suspension_version,
                CALLBACK_EVENT_TYPE,
                fact.event_id,
                e.recorded_at,
            )
        )
    elif isinstance(fact, (TaskCompleted, TaskFailed)) and fact.run_due:
        # The task's outcome is recorded: the run is due (the worker also marks it and
        # enqueues the resume at once; this is the path of a rebuilt projection).
        writes.mark(
            PendingMark(
                e.tenant_id,
                e.stream_id,
                fact.suspension_version,
                TASK_OUTCOME,
                fact.task_id,
                e.recorded_at,
            )
        )
    elif isinstance(fact, ChildrenSettled):
        # The join's children settled (recorded by the last child's transaction, which
        # cannot reach the resume queue): the run is due now. Enqueueing leases the row
        # first, so a row that is gone is not sent.
        writes.mark(
            PendingMark(
                e.tenant_id,
                e.stream_id,
                fact.suspension_version,
                CHILDREN_OUTCOME,
                fact.join_id,
                e.recorded_at,
            )
        )
        return WokenRun(e.tenant_id, e.stream_id, fact.step_index, fact.join_id, e.recorded_at)
    elif isinstance(fact, RunMigrated):
        writes.before_write(e.tenant_id, e.stream_id)
        return _migrated(store, e, fact, now, budget)
    return None


# How long a projector lets passes gather before its next catch-up (PROJECTION_LINGER_MS).
DEFAULT_LINGER_SECONDS = 0.05


@dataclass
class CatchUpPacer:
    """Starts one projector's catch-ups at least `linger_seconds` apart.

    Under a steady stream of passes a catch-up started right after the last one finds
    only the events of those few milliseconds, and pays its fixed cost (the horizon,
    the checkpoint's lock and save, the lag count) for each such handful, on the
    database the passes need. Held until `linger_seconds` after the last one started,
    the next catch-up takes the events of that time in one go, leaving the database to
    the passes (docs/BENCHMARKS.md, backlog drain). A catch-up after a quiet spell
    starts at once; one that finds a full batch goes on without a pause
    (project_pending loops). So a new suspension reaches the pending table at most
    `linger_seconds` later, and only while passes keep coming.
    """

    linger_seconds: float = DEFAULT_LINGER_SECONDS
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _last_start: float | None = field(default=None, init=False, repr=False)

    def wait(self) -> float:
        """Sleep until the next catch-up may start, and count it as started then;
        returns the seconds slept."""
        now = self.monotonic()
        slept = 0.0
        if self._last_start is not None and self.linger_seconds > 0:
            slept = max(0.0, self._last_start + self.linger_seconds - now)
            if slept:
                self.sleep(slept)
                now = self.monotonic()
        self._last_start = now
        return slept


def project_pending(
    store: Store,
    now: datetime,
    batch_size: int = 1000,
    max_batches: int | None = None,
    horizon_seconds: int | None = None,
    budget_seconds: float | None = None,
    look_back_budget: int | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> ProjectionResult:
    """Catch the pending projection up with the run streams, in commit order.

    Each batch is one transaction that also advances the checkpoint (exactly once), and
    goes on with look-backs earlier batches left unfinished.

    Args:
        store: the database.
        now: business time.
        batch_size: stream events per batch.
        max_batches: stop after this many batches (None: until caught up).
        horizon_seconds: also return the new suspensions due before now + this.
        budget_seconds: start no batch after this long (None: no limit); each batch
            commits, so the next call continues where this one stopped.
        look_back_budget: stored events one batch's look-backs may examine
            (default lookback.LOOK_BACK_BUDGET).
        monotonic: time source for the budget.

    Returns:
        The events applied, the waits that an already-stored event satisfied, (with
        `horizon_seconds`) the suspensions due before `now + horizon_seconds`, and the
        lag left (run-stream events not applied yet, and the age of the oldest).
    """
    applied = 0
    woken: list[WokenRun] = []
    soon: dict[tuple[str, str], DueRow] = {}
    limit = None if horizon_seconds is None else now + timedelta(seconds=horizon_seconds)
    lag: ProjectionLag | None = None
    batches = 0
    started = monotonic()
    while max_batches is None or batches < max_batches:
        if budget_seconds is not None and batches and monotonic() - started >= budget_seconds:
            break
        batches += 1
        budget = LookBackBudget() if look_back_budget is None else LookBackBudget(look_back_budget)
        with store.transaction():
            # First: the horizon reads the engine's sessions before any snapshot that
            # reads events is taken (see projection_horizon in queries.sql).
            horizon, xid, position = store.checkpoints.start_catch_up(PENDING_PROJECTION, now)
            events = store.streams.read_after(xid, position, batch_size, horizon, _READS_PAYLOAD)
            # Writes whose results are not read travel together; reads sync the pipeline.
            with store.pipeline():
                writes = _PendingWrites(store)
                ahead = _read_ahead(store, events, budget)
                for e in events:
                    if e.stream_type != RUN_STREAM:
                        continue
                    hit = _apply(store, e, now, writes, budget, ahead)
                    if hit is not None:
                        woken.append(hit)
                    if limit is None or e.type not in _TIMED:
                        continue
                    fact = e.fact
                    if isinstance(fact, _TIMED_SUSPENSIONS) and fact.due_at <= limit:
                        key = (e.tenant_id, e.stream_id)
                        soon[key] = DueRow(*key, fact.step_index, fact.due_at)
                writes.flush()
                resumed, unfinished = continue_look_backs(store, now, budget)
                woken.extend(resumed)
                if events:
                    last = events[-1]
                    store.checkpoints.save(PENDING_PROJECTION, last.xid, last.position, now)
                caught_up = len(events) < batch_size and not unfinished
                if caught_up:
                    # The last batch reads the lag left with its save: one round trip.
                    lag = store.checkpoints.lag(PENDING_PROJECTION, now)
        applied += len(events)
        if caught_up:
            break
    if lag is None:
        lag = store.checkpoints.lag(PENDING_PROJECTION, now)
    lag_seconds = 0.0 if lag.oldest is None else max(0.0, (now - lag.oldest).total_seconds())
    return ProjectionResult(applied, woken, list(soon.values()), lag.behind, lag_seconds)
