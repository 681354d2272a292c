"""The due scan: hand due suspensions to the resume queue and start cron runs.

Called every minute by the DueScan function (and by the local runtime). Per tenant,
oldest first and in batches, it leases rows due before ``now + horizon`` and sends
one resume request each, delayed to the second of its ``wake_at`` (SQS allows up to
900 s), so timers fire within about a second instead of at the next tick. It keeps
going until nothing is due or its time budget ends: a backlog drains at the speed
of the database and the queue, not at a fixed number of rows per minute.

The lease (``workflow_run_pending.leased_until``) is what keeps a row that is in
flight from being handed out twice. It must outlast the longest SQS delay plus the
queue's visibility timeout; when it ends without the run having moved (a ResumeRun
that crashed, a message that went to the DLQ), the row is simply due again and the
next scan retries it, which is safe because resume_run claims with optimistic
concurrency.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..cron import CronSchedule
from ..definition import CronTrigger, WorkflowRegistry, default_registry
from ..ports import ResumeQueue
from ..store import Store
from .enqueue import DEFAULT_LEASE_SECONDS, MAX_DELAY_SECONDS, send_leased
from .ingest import start_cron_run
from .persist import RunOutcome

log = logging.getLogger("workflow_runner.due_scan")

# A scheduler that was down for long catches up at most this many instants per
# workflow and tenant per scan; the rest follow on the next scans, each exactly once.
MAX_CRON_INSTANTS_PER_SCAN = 100


@dataclass
class DueScanResult:
    """What one scan did (the DueScan function turns it into metrics)."""

    tenants: int = 0
    leased: int = 0
    enqueued: int = 0
    refused: int = 0
    batches: int = 0
    drained: bool = True  # False: the budget ended with rows still due
    max_lag_seconds: float = 0.0  # how late the oldest row handed out was
    cron_started: list[RunOutcome] = field(default_factory=list)
    cron_checked: int = 0


def start_cron_runs(
    store: Store,
    now: datetime,
    registry: WorkflowRegistry | None = None,
    out_of_time: Callable[[], bool] = lambda: False,
) -> tuple[list[RunOutcome], int]:
    """Start every cron run due in (last_fire_at, now] for each tenant, exactly once.

    A tenant and workflow seen for the first time start counting at ``now``: no
    historical backfill. Each (tenant, workflow) is one transaction holding its
    ``cron_state`` row, and the run id derives from the scheduled instant, so two
    overlapping scans cannot start an instant twice.

    Returns:
        The runs started, and how many (tenant, workflow) pairs were checked.
    """
    registry = registry or default_registry()
    workflows = registry.cron_workflows()
    started: list[RunOutcome] = []
    checked = 0
    if not workflows:
        return started, checked
    for tenant_id in store.inbox.tenants():
        for definition in workflows:
            if out_of_time():
                return started, checked
            assert isinstance(definition.trigger, CronTrigger)
            schedule = CronSchedule.parse(definition.trigger.schedule)
            checked += 1
            with store.transaction():
                last_fire_at = store.cron.lock(tenant_id, definition.name)
                if last_fire_at is None:
                    store.cron.init(tenant_id, definition.name, now)
                    continue
                instants = schedule.fire_times(last_fire_at, now)
                instants = instants[:MAX_CRON_INSTANTS_PER_SCAN]
                for instant in instants:
                    outcome = start_cron_run(store, definition, tenant_id, instant, now)
                    if outcome is not None:
                        started.append(outcome)
                if instants:
                    store.cron.advance(tenant_id, definition.name, instants[-1])
    return started, checked


def due_scan(
    store: Store,
    queue: ResumeQueue,
    now: datetime,
    budget_seconds: float = 45.0,
    horizon_seconds: int = 60,
    batch: int = 500,
    lease_seconds: int = DEFAULT_LEASE_SECONDS,
    registry: WorkflowRegistry | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> DueScanResult:
    """Start due cron runs, then hand every due pending row to the resume queue.

    Tenants are served round-robin, one batch each per round, oldest rows first, so
    one tenant's backlog does not starve the others within the budget.

    Args:
        store: the database.
        queue: where resume requests go.
        now: business time at the start of the scan; it advances with the scan's
            elapsed time, so delays stay exact in a long scan.
        budget_seconds: stop starting new batches after this long.
        horizon_seconds: also hand out rows due within this many seconds (delayed).
        batch: rows leased per statement.
        lease_seconds: how long a handed-out row is not handed out again.
        registry: workflows (for cron triggers).
        monotonic: time source for the budget.

    Returns:
        A DueScanResult.
    """
    if not 0 <= horizon_seconds <= MAX_DELAY_SECONDS:
        raise ValueError(f"horizon_seconds must be within 0..{MAX_DELAY_SECONDS}")
    if lease_seconds <= horizon_seconds:
        raise ValueError("lease_seconds must exceed horizon_seconds (and the queue's visibility)")
    started_at = monotonic()

    def current() -> datetime:
        return now + timedelta(seconds=monotonic() - started_at)

    def out_of_time() -> bool:
        return monotonic() - started_at >= budget_seconds

    result = DueScanResult()
    result.cron_started, result.cron_checked = start_cron_runs(store, now, registry, out_of_time)

    scan_now = current()
    tenants = store.pending.tenants_with_due(
        scan_now, scan_now + timedelta(seconds=horizon_seconds)
    )
    result.tenants = len(tenants)
    active = list(tenants)
    while active:
        still_due: list[str] = []
        for tenant_id in active:
            if out_of_time():
                result.drained = False
                return result
            moment = current()
            lease_until = moment + timedelta(seconds=lease_seconds)
            with store.transaction():
                rows = store.pending.lease_due(
                    tenant_id,
                    moment,
                    moment + timedelta(seconds=horizon_seconds),
                    lease_until,
                    batch,
                )
            result.batches += 1
            result.leased += len(rows)
            if rows:
                oldest = min(row.wake_at for row in rows)
                result.max_lag_seconds = max(
                    result.max_lag_seconds, (moment - oldest).total_seconds()
                )
            sent, refused = send_leased(store, queue, rows, moment, lease_until)
            result.enqueued += sent
            result.refused += refused
            if refused:
                # The queue is refusing: stop for this tick instead of spinning on it.
                log.warning("resume queue refused %d requests; stopping the scan", refused)
                result.drained = False
                return result
            if len(rows) == batch:
                still_due.append(tenant_id)
        active = still_due
    return result
