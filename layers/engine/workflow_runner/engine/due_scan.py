"""The due scan: hand due suspensions to the resume queue and start cron runs.

Called every minute by the DueScan function (and by the local runtime). Per tenant,
oldest first and in batches, it leases rows due before ``now + horizon`` and sends
one resume request each, delayed to the second of its ``wake_at`` (SQS allows up to
900 s), so timers fire within about a second instead of at the next tick. It keeps
going until nothing is due or its time budget ends: a backlog drains at the speed
of the database and the queue, not at a fixed number of rows per minute.

Fairness. The resume queue is first in, first out (SQS standard queues roughly are), so
a request waits behind everything already in it: a scan that handed one tenant's backlog
of 100,000 rows to the queue at once would make every other tenant's run that falls due
meanwhile wait for the whole backlog. So the scan lists the tenants with due rows again
every round (a tenant whose row fell due during the scan joins the next round), leases
at most one batch per tenant per round, oldest rows first, and holds each tenant's due
rows in flight (leased, not yet resumed) to its share: what its consumers resume in
``tenant_queue_seconds``, as the scan measures it from the tenant's rows leaving flight
(TENANT_SHARE_UNMEASURED before its first measurement, never less than
TENANT_SHARE_FLOOR after). The queue then holds about that many seconds of each
backlog, and another tenant's run waits about that long, however large the backlog and
however fast the consumers. ``tenant_max_in_flight`` is an operator's cap on all of a
tenant's rows in flight, those sent ahead with a delay included. A tenant at its share
or cap is held back until its consumers make room: the scan ends when every tenant with
due rows is held, or with ``wait_for_room`` (the DueScan function, whose consumers run
meanwhile) checks again every ROOM_PAUSE_SECONDS until its budget ends.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from ..cron import CronSchedule
from ..definition import CronTrigger, WorkflowRegistry, default_registry
from ..definition.dsl import CatchUp
from ..ports import ResumeQueue
from ..store import Store
from .enqueue import DEFAULT_LEASE_SECONDS, MAX_DELAY_SECONDS, send_leased
from .ingest import start_cron_run
from .persist import RunOutcome

log = logging.getLogger("workflow_runner.due_scan")

# A scheduler that was down for long catches up at most this many instants per
# workflow and tenant per scan; the rest follow on the next scans, each exactly once.
MAX_CRON_INSTANTS_PER_SCAN = 100
# catchup="none": an instant the scan reaches later than this counts as missed. The
# scan runs every minute; this tolerates a few lost ticks, not an outage.
CRON_ON_TIME = timedelta(minutes=5)
# catchup="latest" looks for the most recent instant in growing windows, so a long
# outage of a per-minute schedule does not enumerate every minute it missed.
_LATEST_WINDOWS = (
    timedelta(hours=1),
    timedelta(days=1),
    timedelta(days=32),
    timedelta(days=366),
    timedelta(days=3660),
)
# How many seconds of a tenant's resumes the queue may hold (0: no bound). Until the scan
# has measured a tenant's rate (at its first count in a scan) the share is
# TENANT_SHARE_UNMEASURED; after that it follows the rate, never below the floor.
DEFAULT_TENANT_QUEUE_SECONDS = 0.5
TENANT_SHARE_UNMEASURED = 200
TENANT_SHARE_FLOOR = 20
# A tenant's resume rate is smoothed over about this long.
RATE_WINDOW_SECONDS = 1.0
# With wait_for_room, how often a scan whose tenants are all held checks for room, and
# after how long without any it gives up (its consumers are not running).
ROOM_PAUSE_SECONDS = 0.1
ROOM_GIVE_UP_SECONDS = 10.0


@dataclass
class DueScanResult:
    """What one scan did (the DueScan function turns it into metrics)."""

    tenants: int = 0
    leased: int = 0
    enqueued: int = 0
    refused: int = 0
    batches: int = 0
    # False: the scan ended with due rows it did not hand out -- its budget ended, the
    # queue refused, or tenants were held to their share (the consumers are behind).
    # Rows held back only by tenant_max_in_flight do not count: the operator chose that.
    drained: bool = True
    held_tenants: int = 0  # tenants held to their share when the scan ended
    capped_tenants: int = 0  # tenants held to tenant_max_in_flight when the scan ended
    held_rounds: int = 0  # times a tenant was held back (share or cap)
    max_lag_seconds: float = 0.0  # how late the oldest row handed out was
    cron_started: list[RunOutcome] = field(default_factory=list)
    cron_checked: int = 0


def cron_instants(
    schedule: CronSchedule, catchup: CatchUp, last_fire_at: datetime, now: datetime
) -> tuple[list[datetime], datetime | None]:
    """The instants in (last_fire_at, now] to start under a catch-up policy, and the
    position to record (None: nothing is due yet).

    "all": every instant, oldest first, at most MAX_CRON_INSTANTS_PER_SCAN (the rest on
    the next scans); "latest": the most recent one only; "none": those at most
    CRON_ON_TIME old. The instants skipped are passed for good: the position moves
    past them.
    """
    if catchup == "latest":
        for window in _LATEST_WINDOWS:
            since = max(last_fire_at, now - window)
            found = schedule.fire_times(since, now)
            if found:
                return found[-1:], found[-1]
            if since == last_fire_at:
                break
        return [], None
    if catchup == "none":
        on_time = schedule.fire_times(max(last_fire_at, now - CRON_ON_TIME), now)
        if on_time:
            return on_time, on_time[-1]
        # Missed instants only: move past them so a later scan does not start them.
        missed = cron_instants(schedule, "latest", last_fire_at, now)[1]
        return [], missed
    instants = schedule.fire_times(last_fire_at, now)[:MAX_CRON_INSTANTS_PER_SCAN]
    return instants, (instants[-1] if instants else None)


def start_cron_runs(
    store: Store,
    now: datetime,
    registry: WorkflowRegistry | None = None,
    out_of_time: Callable[[], bool] = lambda: False,
) -> tuple[list[RunOutcome], int]:
    """Start the cron runs due in (last_fire_at, now] for each tenant, exactly once.

    Which of them start is the trigger's catch-up policy (`cron_instants`). A tenant
    and workflow seen for the first time start counting at ``now``: no historical
    backfill. Each (tenant, workflow) is one transaction holding its ``cron_state``
    row, and the run id derives from the scheduled instant, so two overlapping scans
    cannot start an instant twice.

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
                instants, position = cron_instants(
                    schedule, definition.trigger.catchup, last_fire_at, now
                )
                for instant in instants:
                    outcome = start_cron_run(store, definition, tenant_id, instant, now)
                    if outcome is not None:
                        started.append(outcome)
                if position is not None:
                    store.cron.advance(tenant_id, definition.name, position)
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
    tenant_queue_seconds: float = DEFAULT_TENANT_QUEUE_SECONDS,
    tenant_max_in_flight: int = 0,
    wait_for_room: bool = False,
    sleep: Callable[[float], None] = time.sleep,
) -> DueScanResult:
    """Start due cron runs, then hand every due pending row to the resume queue, fairly.

    Each round lists the tenants with free rows due before the horizon and leases one
    batch per tenant, oldest rows first, within the tenant's room: its share (see the
    module docstring) less its due rows in flight, and `tenant_max_in_flight` less all
    its rows in flight. A tenant without room is held back. Rounds follow each other
    while a tenant may have more to send at once; then the scan ends, or with
    `wait_for_room` pauses while tenants are held back.

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
        monotonic: time source for the budget and the tenants' rates.
        tenant_queue_seconds: a tenant's due rows in flight are held to what its
            consumers resume in this long (0: no bound).
        tenant_max_in_flight: at most this many of a tenant's rows in flight, due or
            sent ahead (0: no cap).
        wait_for_room: when every tenant with due rows is held back, check again every
            ROOM_PAUSE_SECONDS until the budget ends (or no room came for
            ROOM_GIVE_UP_SECONDS) instead of ending the scan.
        sleep: how a pause waits (tests pass a fake).

    Returns:
        A DueScanResult.
    """
    if not 0 <= horizon_seconds <= MAX_DELAY_SECONDS:
        raise ValueError(f"horizon_seconds must be within 0..{MAX_DELAY_SECONDS}")
    if lease_seconds <= horizon_seconds:
        raise ValueError("lease_seconds must exceed horizon_seconds (and the queue's visibility)")
    if tenant_queue_seconds < 0 or tenant_max_in_flight < 0:
        raise ValueError("tenant_queue_seconds and tenant_max_in_flight must be 0 (off) or more")
    started_at = monotonic()

    def current() -> datetime:
        return now + timedelta(seconds=monotonic() - started_at)

    def out_of_time() -> bool:
        return monotonic() - started_at >= budget_seconds

    result = DueScanResult()
    result.cron_started, result.cron_checked = start_cron_runs(store, now, registry, out_of_time)

    room = _Room(store, batch, tenant_queue_seconds, tenant_max_in_flight, monotonic)
    seen: set[str] = set()
    # Tenants that may have more to send right now: listed but not yet served this
    # round, or whose last batch came back full. The budget ending with any of them
    # left means the scan fell behind.
    unfinished: set[str] | None = None
    last_room_at = monotonic()
    while True:
        if unfinished is not None and out_of_time():
            result.drained = not unfinished and not result.held_tenants
            return result
        scan_now = current()
        tenants = store.pending.tenants_with_due(
            scan_now, scan_now + timedelta(seconds=horizon_seconds)
        )
        seen.update(tenants)
        result.tenants = len(seen)
        unfinished = set(tenants)
        leased_this_round = 0
        held: set[str] = set()
        capped: set[str] = set()
        for tenant_id in tenants:
            if out_of_time():
                result.drained = False
                return result
            moment = current()
            lease_until = moment + timedelta(seconds=lease_seconds)
            with store.transaction():
                limit, bound = room.take(tenant_id, moment)
                rows = (
                    store.pending.lease_due(
                        tenant_id,
                        moment,
                        moment + timedelta(seconds=horizon_seconds),
                        lease_until,
                        limit,
                    )
                    if limit > 0
                    else []
                )
            due_now = sum(1 for row in rows if row.wake_at <= moment)
            room.leased(tenant_id, due_now)
            if len(rows) < limit:
                unfinished.discard(tenant_id)  # it has nothing more to send
            elif bound == "cap":
                unfinished.discard(tenant_id)
                capped.add(tenant_id)
            elif bound == "share" and due_now == len(rows):
                unfinished.discard(tenant_id)
                held.add(tenant_id)  # more due than its share: its consumers are behind
            # Otherwise it filled a batch, or its share with rows due later (the share
            # bounds due rows only): there may be more to send at once.
            if limit <= 0:
                continue
            result.batches += 1
            result.leased += len(rows)
            leased_this_round += len(rows)
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
        result.held_tenants, result.capped_tenants = len(held), len(capped)
        result.held_rounds += len(held) + len(capped)
        if leased_this_round:
            last_room_at = monotonic()
        if unfinished:
            continue  # a tenant filled a whole batch: there is more to send at once
        # Every tenant listed is drained, held back, or its rows are locked by another
        # scan: the rest waits for the consumers to make room. Rows held to a share are
        # a backlog the consumers have not caught up with (not drained); rows held only
        # by an operator's cap are not.
        result.drained = not held
        if not (held or capped) or not wait_for_room:
            return result
        if monotonic() - last_room_at >= ROOM_GIVE_UP_SECONDS:
            return result
        if monotonic() - started_at + ROOM_PAUSE_SECONDS >= budget_seconds:
            return result
        sleep(ROOM_PAUSE_SECONDS)


Bound = Literal["batch", "share", "cap"]


@dataclass
class _Flow:
    """One tenant's due rows in flight as the scan left them, and how fast they leave."""

    in_flight: int  # due rows in flight right after the scan's last lease for the tenant
    at: float  # when the scan counted them (monotonic seconds)
    rate: float | None  # rows per second leaving flight, smoothed; None: not measured yet
    share: int  # the share the last count allowed


class _Room:
    """How many rows each tenant may lease now: a batch, less what its share and its cap
    leave. The share follows the tenant's measured resume rate (see the module
    docstring); counts and leases of one tenant are serialised by its lease lock."""

    def __init__(
        self,
        store: Store,
        batch: int,
        queue_seconds: float,
        cap: int,
        monotonic: Callable[[], float],
    ) -> None:
        self._store = store
        self._batch = batch
        self._seconds = queue_seconds
        self._cap = cap
        self._monotonic = monotonic
        self._flows: dict[str, _Flow] = {}

    def take(self, tenant_id: str, now: datetime) -> tuple[int, Bound]:
        """The tenant's room (at most a batch; 0 or less: held back) and which limit set
        it. Takes the tenant's lease lock until the caller's transaction ends."""
        if not self._seconds and not self._cap:
            return self._batch, "batch"
        flow = self._flows.get(tenant_id)
        self._store.pending.lock_leases(tenant_id)
        # Count well past the share, so that rows leaving flight are seen as leaving.
        known = max(flow.in_flight, flow.share) if flow else 0
        count_limit = 2 * max(known, TENANT_SHARE_UNMEASURED) + self._batch
        counted = self._store.pending.in_flight(
            tenant_id, now, count_limit if self._seconds else 0, self._cap
        )
        at = self._monotonic()
        rate = flow.rate if flow else None
        if flow is not None and at > flow.at:
            elapsed = at - flow.at
            sample = max(0, flow.in_flight - counted.due) / elapsed
            weight = 1 - math.exp(-elapsed / RATE_WINDOW_SECONDS)
            rate = sample if rate is None else rate + weight * (sample - rate)
            if counted.due == 0 and flow.in_flight > 0:
                # Its flight ran dry: the consumers resumed all of it and then waited
                # for more, so they are at least this fast. Smoothed, a first sample
                # taken before they started (a cold start) kept the share near the
                # floor for seconds while they idled between pauses.
                rate = max(rate, sample)
        share = (
            TENANT_SHARE_UNMEASURED
            if rate is None
            else max(TENANT_SHARE_FLOOR, int(rate * self._seconds))
        )
        self._flows[tenant_id] = _Flow(counted.due, at, rate, share)
        room: int = self._batch
        bound: Bound = "batch"
        if self._seconds and share - counted.due < room:
            room, bound = share - counted.due, "share"
        if self._cap and self._cap - counted.total < room:
            room, bound = self._cap - counted.total, "cap"
        return room, bound

    def leased(self, tenant_id: str, due_rows: int) -> None:
        """Record the due rows just leased for the tenant (they are in flight now)."""
        flow = self._flows.get(tenant_id)
        if flow is not None:
            flow.in_flight += due_rows
