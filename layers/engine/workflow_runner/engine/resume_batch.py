"""ResumeRun's batch: resume delivered requests together and requeue the early ones.

The resume queue delivers requests in batches (SQS: up to ten). They are resumed in
one transaction (`resume.resume_runs`); a request that arrived before its run is due
(a delay longer than SQS allows, or a clock ahead of ours) goes back to the queue,
delayed to its due time, once per suspension even when SQS delivered it twice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ..definition import WorkflowRegistry
from ..errors import RunNotFound
from ..ports import Nudger, ResumeQueue, ResumeRequest
from ..store import Store
from .enqueue import MAX_DELAY_SECONDS
from .resume import ResumeRequestItem, ResumeResult, resume_runs


@dataclass
class ResumeBatchReport:
    """What a batch did, request by request (`results` in request order) and in sum."""

    results: list[ResumeResult | Exception]
    requeued: int = 0
    not_found: int = 0
    errors: int = 0
    resumed: int = 0  # passes that ran (suspended, completed or failed)
    completed: int = 0
    failed: int = 0
    lag_seconds: list[float] = field(default_factory=list)  # due time to resume, per pass


def resume_batch(
    store: Store,
    queue: ResumeQueue,
    nudger: Nudger,
    requests: Sequence[ResumeRequestItem],
    now: datetime,
    registry: WorkflowRegistry,
) -> ResumeBatchReport:
    """Resume a batch of requests in one transaction, requeue early ones, nudge.

    An unknown run, or another tenant's, comes back as its RunNotFound (nothing
    written); a failure of the whole transaction raises, so the whole batch is retried.
    After any pass ran, the projection and the dispatcher are nudged.
    """
    results = resume_runs(store, requests, now, registry)
    report = ResumeBatchReport(results)
    requeue: dict[tuple[str, str, int], ResumeRequest] = {}
    for request, result in zip(requests, results, strict=True):
        if isinstance(result, RunNotFound):
            report.not_found += 1
        elif isinstance(result, Exception):
            report.errors += 1
        elif result.outcome == "not-due" and result.wake_at is not None:
            delay = min(
                MAX_DELAY_SECONDS, max(1, math.ceil((result.wake_at - now).total_seconds()))
            )
            key = (request.tenant_id, request.run_id, request.step_index)
            if key not in requeue:
                requeue[key] = ResumeRequest(*key, delay)
        elif result.outcome in ("suspended", "completed", "failed"):
            report.resumed += 1
            report.completed += result.outcome == "completed"
            report.failed += result.outcome == "failed"
            if result.wake_at is not None:
                report.lag_seconds.append(max(0.0, (now - result.wake_at).total_seconds()))
    if requeue:
        queue.send(list(requeue.values()))
        report.requeued = len(requeue)
    if report.resumed:
        nudger.nudge_projection()
        nudger.nudge_dispatcher()
    return report
