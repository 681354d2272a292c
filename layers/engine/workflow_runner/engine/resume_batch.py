"""ResumeRun's batch: resume delivered requests together and requeue the early ones.

The resume queue delivers requests in batches (SQS: up to ten, or up to the
template's ResumeBatchSize with a batching window). They are resumed in
one transaction (`resume.resume_runs`); a request that arrived before its run is due
(a delay longer than SQS allows, or a clock ahead of ours) goes back to the queue,
delayed to its due time, once per suspension even when SQS delivered it twice.

SQS delays are whole seconds, so a timer sent rounded up arrives up to a second late.
With a `Hold`, requests are sent to arrive up to `Hold.seconds` early instead (see
`enqueue.delay_for`) and the batch holds them until their run is due: timers land
within the consumer's polling latency of their instant, not within a second.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ..definition import WorkflowRegistry
from ..definition.hosts import REGISTERED_HOSTS, DefinitionHosts
from ..errors import RunNotFound
from ..ports import Nudger, ResumeQueue, ResumeRequest
from ..store import Store
from .enqueue import MAX_DELAY_SECONDS, enqueue_due
from .handing import ResumeForwarder, forward_kept
from .resume import ResumeRequestItem, ResumeResult, resume_runs
from .resume_answers import RAN


@dataclass(frozen=True)
class Hold:
    """Hold requests that arrive at most `seconds` before their run is due.

    `wait_until(instant)` blocks until `instant` and returns the time then, or returns
    None without waiting when the caller cannot wait that long (its time budget): those
    requests go back to the queue as without a hold.
    """

    seconds: float
    wait_until: Callable[[datetime], datetime | None]


@dataclass
class ResumeBatchReport:
    """What a batch did, request by request (`results` in request order) and in sum."""

    results: list[ResumeResult | Exception]
    requeued: int = 0
    not_found: int = 0
    errors: int = 0
    resumed: int = 0  # passes that ran (suspended, completed or failed)
    forwarded: int = 0  # answered by a kept version of the function
    completed: int = 0
    failed: int = 0
    lag_seconds: list[float] = field(default_factory=list)  # due time to resume, per pass
    # Per request (in request order): the instant its pass ran at, None when none ran. A
    # held request's is the instant its hold ended, not the end of the batch.
    resumed_at: list[datetime | None] = field(default_factory=list)


def resume_batch(
    store: Store,
    queue: ResumeQueue,
    nudger: Nudger,
    requests: Sequence[ResumeRequestItem],
    now: datetime,
    registry: WorkflowRegistry,
    hold: Hold | None = None,
    requeue_early: bool = True,
    hosts: DefinitionHosts | None = REGISTERED_HOSTS,
    forwarder: ResumeForwarder | None = None,
) -> ResumeBatchReport:
    """Resume a batch of requests in one transaction, hold or requeue early ones, nudge.

    An unknown run, or another tenant's, comes back as its RunNotFound (nothing
    written); a failure of the whole transaction raises, so the whole batch is retried.
    Requests due within `hold.seconds` are resumed when due (a transaction per instant),
    the others not due yet go back to the queue. After any pass ran, the projection
    and the dispatcher are nudged.

    Args:
        hold: how long early requests may be held until due (None: not at all).
        requeue_early: put requests that arrived before their run is due back on the
            queue (queue deliveries); a direct invoke answers `not-due` instead and
            sends nothing.
        hosts: where kept code is found (definition/hosts.py; None: nothing is kept).
        forwarder: hands requests whose run's definition only a kept version has to
            that version (None: they are answered `on-kept-version`).
    """
    results = resume_runs(store, requests, now, registry, hosts)
    woken, store.flow.woken = store.flow.woken, []
    if woken:  # held work a freed slot woke (flow control): to the queue at once
        enqueue_due(store, queue, woken, now)
    ran_at: list[datetime] = [now] * len(requests)
    if hold is not None and hold.seconds > 0:
        now = _resume_held(store, requests, results, ran_at, now, registry, hold, hosts)
    if forwarder is not None:
        forward_kept(store, requests, results, now, registry, hosts, forwarder)
    report = ResumeBatchReport(results)
    requeue: dict[tuple[str, str, int], ResumeRequest] = {}
    for request, result, at in zip(requests, results, ran_at, strict=True):
        if isinstance(result, ResumeResult) and result.kept_on is not None:
            at = now  # forwarded, after the holds
        ran = isinstance(result, ResumeResult) and result.outcome in RAN
        report.resumed_at.append(at if ran else None)
        if isinstance(result, RunNotFound):
            report.not_found += 1
        elif isinstance(result, Exception):
            report.errors += 1
        elif result.outcome == "not-due" and result.wake_at is not None and requeue_early:
            delay = min(
                MAX_DELAY_SECONDS, max(1, math.ceil((result.wake_at - now).total_seconds()))
            )
            key = (request.tenant_id, request.run_id, request.step_index)
            if key not in requeue:
                requeue[key] = ResumeRequest(*key, delay)
        elif result.outcome in RAN:
            report.forwarded += result.kept_on is not None
            report.resumed += 1
            report.completed += result.outcome == "completed"
            report.failed += result.outcome == "failed"
            if result.wake_at is not None:
                report.lag_seconds.append(max(0.0, (at - result.wake_at).total_seconds()))
    if requeue:
        queue.send(list(requeue.values()))
        report.requeued = len(requeue)
    if report.resumed:
        nudger.nudge_projection()
        nudger.nudge_dispatcher()
    return report


def _resume_held(
    store: Store,
    requests: Sequence[ResumeRequestItem],
    results: list[ResumeResult | Exception],
    ran_at: list[datetime],
    now: datetime,
    registry: WorkflowRegistry,
    hold: Hold,
    hosts: DefinitionHosts | None,
) -> datetime:
    """Wait for the held requests' due instants, soonest first, and resume them then
    (in place in `results`, the instant each ran at in `ran_at`); returns the time after
    the last wait."""
    for _ in range(len(requests) + 1):
        early = [
            (wake_at, i)
            for i, r in enumerate(results)
            if isinstance(r, ResumeResult)
            and r.outcome == "not-due"
            and (wake_at := r.wake_at) is not None
            and (wake_at - now).total_seconds() <= hold.seconds
        ]
        if not early:
            break
        later = hold.wait_until(min(early)[0])
        if later is None:
            break
        now = max(now, later)
        due = [i for wake_at, i in early if wake_at <= now]
        if due:
            again = resume_runs(store, [requests[i] for i in due], now, registry, hosts)
            for i, result in zip(due, again, strict=True):
                results[i] = result
                ran_at[i] = now
    return now
