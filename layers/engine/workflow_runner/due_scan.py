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
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .cron import CronSchedule
from .dsl import CronTrigger
from .operations import DueRun, RunOutcome, WokenRun, start_cron_run
from .ports import ResumeQueue, ResumeRequest
from .registry import WorkflowRegistry, default_registry
from .store import Store

log = logging.getLogger("workflow_runner.due_scan")

MAX_DELAY_SECONDS = 900  # the SQS DelaySeconds ceiling
DEFAULT_LEASE_SECONDS = 1200
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


def delay_for(wake_at: datetime, now: datetime) -> int:
    """Seconds to delay a resume request so it arrives at ``wake_at`` (0..900, rounded up)."""
    seconds = math.ceil((wake_at - now).total_seconds())
    return max(0, min(MAX_DELAY_SECONDS, seconds))


def _send(
    store: Store,
    queue: ResumeQueue,
    tenant_id: str,
    rows: Sequence[dict[str, Any]],
    now: datetime,
    lease_until: datetime,
) -> tuple[int, int]:
    """Send leased rows to the queue; release the lease of those it refused."""
    requests = [
        ResumeRequest(
            tenant_id=tenant_id,
            run_id=row["run_id"],
            step_index=row["step_index"],
            delay_seconds=delay_for(row["wake_at"], now),
            wake_at=row["wake_at"],
        )
        for row in sorted(rows, key=lambda r: (r["wake_at"], r["run_id"]))
    ]
    refused = queue.send(requests) if requests else []
    for request in refused:
        store.execute(
            "release_lease",
            {
                "tenant_id": request.tenant_id,
                "run_id": request.run_id,
                "step_index": request.step_index,
                "lease_until": lease_until,
            },
        )
    return len(requests) - len(refused), len(refused)


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
    for tenant_id in store.list_tenants():
        for definition in workflows:
            if out_of_time():
                return started, checked
            assert isinstance(definition.trigger, CronTrigger)
            schedule = CronSchedule.parse(definition.trigger.schedule)
            params = {"tenant_id": tenant_id, "workflow_name": definition.name, "now": now}
            checked += 1
            with store.transaction():
                row = store.fetch_one("lock_cron_state", params)
                if row is None:
                    store.execute("init_cron_state", params)
                    continue
                instants = schedule.fire_times(row["last_fire_at"], now)
                instants = instants[:MAX_CRON_INSTANTS_PER_SCAN]
                for instant in instants:
                    outcome = start_cron_run(store, definition, tenant_id, instant, now)
                    if outcome is not None:
                        started.append(outcome)
                if instants:
                    store.execute("advance_cron_state", {**params, "last_fire_at": instants[-1]})
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
    tenants = [
        row["tenant_id"]
        for row in store.fetch_all(
            "tenants_with_due_rows",
            {"now": scan_now, "horizon": scan_now + timedelta(seconds=horizon_seconds)},
        )
    ]
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
                rows = store.fetch_all(
                    "lease_due_rows",
                    {
                        "tenant_id": tenant_id,
                        "now": moment,
                        "horizon": moment + timedelta(seconds=horizon_seconds),
                        "lease_until": lease_until,
                        "limit": batch,
                    },
                )
            result.batches += 1
            result.leased += len(rows)
            if rows:
                oldest = min(row["wake_at"] for row in rows)
                result.max_lag_seconds = max(
                    result.max_lag_seconds, (moment - oldest).total_seconds()
                )
            sent, refused = _send(store, queue, tenant_id, rows, moment, lease_until)
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


def enqueue_woken(
    store: Store,
    queue: ResumeQueue,
    woken: Sequence[WokenRun | DueRun],
    now: datetime,
    lease_seconds: int = DEFAULT_LEASE_SECONDS,
) -> tuple[int, int]:
    """Send runs an awaited event just woke (or new suspensions due within the scan
    horizon) to the resume queue at once, delayed to their wake time.

    Each row is leased first so the next due scan does not send it again; a row
    whose lease is taken is already on its way.

    Returns:
        (sent, refused) counts; refused rows keep no lease and the due scan retries them.
    """
    lease_until = now + timedelta(seconds=lease_seconds)
    sent = refused = 0
    by_tenant: dict[str, list[dict[str, Any]]] = {}
    for run in woken:
        row = store.fetch_one(
            "lease_pending_row",
            {
                "tenant_id": run.tenant_id,
                "run_id": run.run_id,
                "step_index": run.step_index,
                "now": now,
                "lease_until": lease_until,
            },
        )
        if row is not None:
            by_tenant.setdefault(run.tenant_id, []).append(row)
    for tenant_id, rows in by_tenant.items():
        ok, bad = _send(store, queue, tenant_id, rows, now, lease_until)
        sent += ok
        refused += bad
    return sent, refused
