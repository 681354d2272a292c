"""The purge: delete settled runs past their retention, and inbox rows nothing reads.

Storage would otherwise grow with every run. A run that completed, failed or was
cancelled longer ago than its workflow's retention (`define_workflow(retention=...)`,
else the deployment's RUN_RETENTION; "forever" keeps it) is deleted with everything
stored for it: its run stream, summary, results, consumed events, tasks, callbacks,
pending leftovers, the joins it started and their child rows, and its settled mail and
webhook requests with their dispatch streams (and local captured mail).

A run is left alone, to be purged by a later call, while anything may still touch it
(queries_purge.sql, purge_runs): an event of its streams the pending projection has not
applied yet, a request not delivered yet, an open task, a join of a parent that has not
counted it, or a child of its own not settled and counted. Runs that are not settled are
never purged.

Then the inbox: rows received longer ago than the default retention, and never less
than INBOX_MIN_KEEP (so a redelivery from an intake queue or dead-letter queue is still
a no-op), that no remaining run names as its trigger or as an awaited event it took,
that no open wait could still take (at or after its look-back start), and not after the
earliest start of an unsettled run of the tenant (minus TRIGGER_TIME_MARGIN: a later
wait of that run looks back to its trigger event by default). A wait whose explicit
look-back reaches further back than the retention does not see purged events.

Batches. Each batch is one short transaction: one statement locks at most `batch_size`
runs (FOR UPDATE SKIP LOCKED, so purgers running at once take disjoint runs, and a
redrive, which locks the summary row first, is never purged mid-write) and deletes
them. A batch short only because another purger held some of its runs goes on to the
next; a batch that found every run it could take held by another purger ends the call
with `more_left` (the holder goes on). An inbox batch examines `batch_size` rows in
insertion order under the wakeup locks of their (tenant, type), taken without waiting.
The loop ends when nothing is left, or at `max_batches` or the time budget, with
`more_left` set.

A dry run does the same inside one transaction that is rolled back: exact counts,
nothing written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from ..definition import WorkflowRegistry, default_registry
from ..errors import InvalidInput
from ..retention import DEFAULT_RETENTION, MIN_RETENTION, Retention, describe_retention
from ..store import Store
from .projection import PENDING_PROJECTION

log = logging.getLogger("workflow_runner.purge")

# The intake queues and their dead-letter queues keep a message 14 days: an inbox row is
# kept at least that long so that a redelivered trigger still finds it (and starts
# nothing twice) even when the runs it started were purged.
INBOX_MIN_KEEP = timedelta(days=14)
# How much earlier than a run's start its trigger event's own time may be (an intake
# retried or redriven late): the inbox keeps that much before an unsettled run's start.
TRIGGER_TIME_MARGIN = timedelta(days=14)
DEFAULT_BATCH_SIZE = 500
MAX_BATCH_SIZE = 10_000


@dataclass(frozen=True)
class PurgeResult:
    """What a purge deleted (a dry run: what it would delete)."""

    runs: int = 0
    events: int = 0  # run-stream and dispatch-stream events
    outbox_rows: int = 0
    inbox_rows: int = 0
    other_rows: int = 0  # results, consumed events, tasks, callbacks, pending, joins
    batches: int = 0
    more_left: bool = False  # the budget or max_batches ended it with work left
    dry_run: bool = False


class _DryRun(Exception):
    """Rolls the dry run's transaction back, carrying what it counted."""

    def __init__(self, result: PurgeResult) -> None:
        super().__init__("dry run")
        self.result = result


def purge_settled_runs(
    store: Store,
    now: datetime,
    *,
    registry: WorkflowRegistry | None = None,
    default_retention: Retention = DEFAULT_RETENTION,
    older_than: timedelta | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_batches: int | None = None,
    budget_seconds: float | None = None,
    dry_run: bool = False,
    monotonic: Callable[[], float] = time.monotonic,
) -> PurgeResult:
    """Delete settled runs past their retention and the inbox rows nothing reads.

    Args:
        store: the database.
        now: business time; a run settled (last updated) before now minus its
            retention is purged.
        registry: the deployment's workflows, for their own retentions; a workflow not
            registered keeps `default_retention`.
        default_retention: RUN_RETENTION (None: forever).
        older_than: an operator's override of every retention but "forever" (at least
            MIN_RETENTION).
        batch_size: runs per transaction, and inbox rows examined per transaction.
        max_batches: at most this many transactions (None: no bound).
        budget_seconds: no new batch after this long (None: no bound).
        dry_run: count what would be deleted, in a transaction rolled back at the end.

    Returns:
        A PurgeResult; `more_left` when the bound or the budget ended it first.

    Raises:
        InvalidInput: a bound out of range or `older_than` below MIN_RETENTION (nothing
            written).
    """
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise InvalidInput(f"purge: batch size must be 1 to {MAX_BATCH_SIZE}, not {batch_size}")
    if max_batches is not None and max_batches < 1:
        raise InvalidInput(f"purge: max batches must be at least 1, not {max_batches}")
    if older_than is not None and older_than < MIN_RETENTION:
        raise InvalidInput(
            f"purge: older than {describe_retention(older_than)} is below the minimum "
            f"retention {describe_retention(MIN_RETENTION)}"
        )
    retentions = dict((registry or default_registry()).retentions())
    if older_than is not None:
        retentions = {name: None if r is None else older_than for name, r in retentions.items()}
        default_retention = older_than if default_retention is not None else None
    purge = _Purge(store, now, retentions, default_retention, batch_size, max_batches)
    started = monotonic()
    purge.out_of_time = lambda: (
        budget_seconds is not None and monotonic() - started >= budget_seconds
    )
    if not dry_run:
        result = purge.run()
    else:
        try:
            with store.transaction():
                raise _DryRun(purge.run())
        except _DryRun as rolled_back:
            result = replace(rolled_back.result, dry_run=True)
    log.info(
        "purge done",
        extra={
            "runs": result.runs,
            "events": result.events,
            "inbox_rows": result.inbox_rows,
            "more_left": result.more_left,
            "dry_run": result.dry_run,
        },
    )
    return result


def _seconds(retention: Retention) -> float | None:
    return None if retention is None else retention.total_seconds()


class _Purge:
    """One purge call's batches, runs first, then the inbox."""

    def __init__(
        self,
        store: Store,
        now: datetime,
        retentions: Mapping[str, Retention],
        default_retention: Retention,
        batch_size: int,
        max_batches: int | None,
    ) -> None:
        self.store = store
        self.now = now
        self.retentions = {name: _seconds(r) for name, r in retentions.items()}
        self.default_retention = default_retention
        self.batch_size = batch_size
        self.max_batches = max_batches
        self.out_of_time: Callable[[], bool] = lambda: False
        self.result = PurgeResult()

    def _may_continue(self) -> bool:
        if self.max_batches is not None and self.result.batches >= self.max_batches:
            return False
        return not self.out_of_time()

    def run(self) -> PurgeResult:
        runs_done = self._runs()
        inbox_done = runs_done and self._inbox()
        return replace(self.result, more_left=not (runs_done and inbox_done))

    def _runs(self) -> bool:
        """Batches of runs until none is left (True) or the bounds end it (False)."""
        while self._may_continue():
            with self.store.transaction():
                batch = self.store.purge.purge_runs(
                    self.now,
                    self.retentions,
                    _seconds(self.default_retention),
                    self.batch_size,
                    PENDING_PROJECTION,
                )
            r = self.result
            self.result = replace(
                r,
                runs=r.runs + batch.runs,
                events=r.events + batch.run_events + batch.dispatch_events,
                outbox_rows=r.outbox_rows + batch.outbox_rows,
                other_rows=r.other_rows + batch.other_rows,
                batches=r.batches + 1,
            )
            # A batch that saw fewer candidates than it may take reached the end. One
            # that took fewer than it saw lost some to another purger (or a redrive)
            # holding them: there may be more past them, so go on - unless it took
            # none, when the holder goes on and this call stops with more left.
            if batch.candidates < self.batch_size:
                return True
            if batch.runs == 0:
                return False
        return False

    def _inbox(self) -> bool:
        """Batches over the inbox until its recent rows (True) or the bounds (False)."""
        if self.default_retention is None:
            return True  # kept forever: so are the events
        cutoff = self.now - max(self.default_retention, INBOX_MIN_KEEP)
        after = 0
        while self._may_continue():
            with self.store.transaction():
                page = self.store.purge.inbox_page(after, self.batch_size)
                if not page:
                    return True
                old = {(row.tenant_id, row.type) for row in page if row.received_at < cutoff}
                # Sorted: two purgers try the same locks in the same order.
                locked = self.store.purge.lock_inbox_types(sorted(old))
                deleted = self.store.purge.delete_inbox(
                    locked,
                    after,
                    page[-1].position,
                    cutoff,
                    TRIGGER_TIME_MARGIN.total_seconds(),
                )
            self.result = replace(
                self.result,
                inbox_rows=self.result.inbox_rows + deleted,
                batches=self.result.batches + 1,
            )
            # Positions follow insertion, roughly receive time: a page that ends with a
            # recent row (or is short) reached the rows the retention still keeps.
            if len(page) < self.batch_size or page[-1].received_at >= cutoff:
                return True
            after = page[-1].position
        return False


__all__ = ["INBOX_MIN_KEEP", "PurgeResult", "purge_settled_runs"]
