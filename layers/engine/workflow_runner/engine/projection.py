"""The pending projection: `workflow_run_pending` caught up with the run streams.

PendingProjection calls `project_pending` after a nudge and on a schedule. It reads
`wf_events` in commit order (see read_events_after in store/queries.sql) and, in the
same transaction as its writes, advances its checkpoint, so every event is applied
exactly once: a suspension upserts the run's row, a match marks it due, a resume or a
terminal event deletes it. Because it is a projection, the table can be dropped and
rebuilt from the streams at any time (invariant 1).

When it creates a waiting-for-event row it looks back into the inbox for an event that
arrived before the row existed (invariant 5), under the same lock as the wakeup.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..match import equality_key, matches_safely
from ..store import DueRow, NewPendingRow, Store, StoredEvent
from ..stream import (
    CALLBACK_EVENT_TYPE,
    RUN_STREAM,
    TERMINAL_TYPES,
    CallbackCompleted,
    ChildrenSettled,
    ChildrenWaiting,
    RetryScheduled,
    StepEventMatched,
    StepResumed,
    StepWaiting,
    StepWaitingForCallback,
    StepWaitingForEvent,
    Suspension,
    TaskCompleted,
    TaskFailed,
    TaskScheduled,
    TasksScheduled,
)
from .joins import CHILDREN_OUTCOME
from .wakeup import WokenRun, record_match

PENDING_PROJECTION = "workflow_run_pending"
# What a pending row of a task suspension records in trigger_event_type once the task's
# outcome is recorded (awaited_event_id then holds the task id).
TASK_OUTCOME = "workflow.task"
LOOK_BACK_PAGE = 500


@dataclass(frozen=True)
class ProjectionResult:
    """What a catch-up applied; `woken`: waits an already-stored event satisfied;
    `due_soon`: new suspensions due within the horizon asked for (to enqueue now,
    delayed, instead of waiting for the next due-scan tick)."""

    applied: int
    woken: list[WokenRun] = field(default_factory=list)
    due_soon: list[DueRow] = field(default_factory=list)


def _look_back(
    store: Store, e: StoredEvent, wait: StepWaitingForEvent, now: datetime
) -> WokenRun | None:
    """Find an already-stored event a new wait accepts (arrived before the wait existed)."""
    since = wait.lookback_from or e.recorded_at
    after = 0
    while True:
        rows = store.inbox.candidates(
            e.tenant_id,
            e.stream_id,
            wait.event_type,
            since,
            wait.consumed_event_ids or [],
            after,
            LOOK_BACK_PAGE,
        )
        for row in rows:
            if matches_safely(wait.match, row.detail):
                if record_match(
                    store,
                    e.tenant_id,
                    e.stream_id,
                    wait.step_index,
                    e.version,
                    row.event_id,
                    wait.event_type,
                    now,
                ):
                    return WokenRun(e.tenant_id, e.stream_id, wait.step_index, row.event_id, now)
                return None
        if len(rows) < LOOK_BACK_PAGE:
            return None
        after = rows[-1].position


class _PendingDeletes:
    """Deletes of the pending projection, sent as one statement.

    A delete only has to happen before a later write of the same run, so deletes are
    collected and flushed when such a write comes, and at the end of the batch.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.runs: dict[tuple[str, str], None] = {}

    def add(self, tenant_id: str, run_id: str) -> None:
        self.runs[(tenant_id, run_id)] = None

    def before_write(self, tenant_id: str, run_id: str) -> None:
        if (tenant_id, run_id) in self.runs:
            self.flush()

    def flush(self) -> None:
        if self.runs:
            self.store.pending.delete_runs(list(self.runs))
            self.runs.clear()


def _pending_row(e: StoredEvent, fact: Suspension | StepWaitingForCallback) -> NewPendingRow:
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
        lookback_from=wait.lookback_from if wait else None,
        match_key=equality_key(wait.match) if wait else None,
    )


def _apply(
    store: Store, e: StoredEvent, now: datetime, deletes: _PendingDeletes
) -> WokenRun | None:
    fact = e.fact
    if isinstance(
        fact,
        (
            StepWaiting,
            StepWaitingForEvent,
            RetryScheduled,
            TaskScheduled,
            TasksScheduled,
            ChildrenWaiting,
            StepWaitingForCallback,
        ),
    ):
        deletes.before_write(e.tenant_id, e.stream_id)
        if isinstance(fact, StepWaitingForEvent):
            store.inbox.lock_type(e.tenant_id, fact.event_type)
        store.pending.upsert(_pending_row(e, fact))
        if isinstance(fact, StepWaitingForEvent):
            return _look_back(store, e, fact, now)
    elif isinstance(fact, StepEventMatched):
        deletes.before_write(e.tenant_id, e.stream_id)
        store.pending.mark_matched(
            e.tenant_id,
            e.stream_id,
            fact.suspension_version,
            fact.event_type,
            fact.event_id,
            e.recorded_at,
        )
    elif isinstance(fact, CallbackCompleted):
        # The completion marks the row and enqueues the resume itself; this is the path
        # of a row projected after the completion, or of a rebuilt projection.
        deletes.before_write(e.tenant_id, e.stream_id)
        store.pending.mark_matched(
            e.tenant_id,
            e.stream_id,
            fact.suspension_version,
            CALLBACK_EVENT_TYPE,
            fact.event_id,
            e.recorded_at,
        )
    elif isinstance(fact, (TaskCompleted, TaskFailed)) and fact.run_due:
        # The task's outcome is recorded: the run is due (the worker also marks it and
        # enqueues the resume at once; this is the path of a rebuilt projection).
        deletes.before_write(e.tenant_id, e.stream_id)
        store.pending.mark_matched(
            e.tenant_id,
            e.stream_id,
            fact.suspension_version,
            TASK_OUTCOME,
            fact.task_id,
            e.recorded_at,
        )
    elif isinstance(fact, ChildrenSettled):
        # The join's children settled (recorded by the last child's transaction, which
        # cannot reach the resume queue): the run is due now. Enqueueing leases the row
        # first, so a row that is gone is not sent.
        deletes.before_write(e.tenant_id, e.stream_id)
        store.pending.mark_matched(
            e.tenant_id,
            e.stream_id,
            fact.suspension_version,
            CHILDREN_OUTCOME,
            fact.join_id,
            e.recorded_at,
        )
        return WokenRun(e.tenant_id, e.stream_id, fact.step_index, fact.join_id, e.recorded_at)
    elif isinstance(fact, StepResumed) or e.type in TERMINAL_TYPES:
        deletes.add(e.tenant_id, e.stream_id)
    return None


def project_pending(
    store: Store,
    now: datetime,
    batch_size: int = 1000,
    max_batches: int | None = None,
    horizon_seconds: int | None = None,
) -> ProjectionResult:
    """Catch the pending projection up with the run streams, in commit order.

    Each batch is one transaction that also advances the checkpoint (exactly once).
    Returns the events applied, the waits that an already-stored event satisfied, and
    (with `horizon_seconds`) the suspensions due before `now + horizon_seconds`.
    """
    applied = 0
    woken: list[WokenRun] = []
    soon: dict[tuple[str, str], DueRow] = {}
    limit = None if horizon_seconds is None else now + timedelta(seconds=horizon_seconds)
    batches = 0
    while max_batches is None or batches < max_batches:
        batches += 1
        with store.transaction():
            xid, position = store.checkpoints.lock(PENDING_PROJECTION, now)
            events = store.streams.read_after(xid, position, batch_size)
            # Writes whose results are not read travel together; reads sync the pipeline.
            with store.pipeline():
                deletes = _PendingDeletes(store)
                for e in events:
                    if e.stream_type != RUN_STREAM:
                        continue
                    hit = _apply(store, e, now, deletes)
                    if hit is not None:
                        woken.append(hit)
                    fact = e.fact
                    if (
                        limit is not None
                        and isinstance(
                            fact,
                            (
                                StepWaiting,
                                StepWaitingForEvent,
                                RetryScheduled,
                                StepWaitingForCallback,
                            ),
                        )
                        and fact.due_at <= limit
                    ):
                        key = (e.tenant_id, e.stream_id)
                        soon[key] = DueRow(*key, fact.step_index, fact.due_at)
                deletes.flush()
                if events:
                    last = events[-1]
                    store.checkpoints.save(PENDING_PROJECTION, last.xid, last.position, now)
        applied += len(events)
        if len(events) < batch_size:
            break
    return ProjectionResult(applied, woken, list(soon.values()))
