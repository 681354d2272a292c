"""The engine's stages, one module each, in data-path order.

ingest (trigger -> inbox -> run start; cron starts) · run_starts (a run's first event and
first pass, one run or a batch) · wakeup (awaited event -> match
-> resume queue) · projection (run streams -> pending rows) · lookback (a new wait takes
an event stored before it) · due_scan (pending rows ->
resume queue) · enqueue (leases, delays) · resume and resume_batch (claim, pass,
persist) · passes (what every pass shares) · cancel · redrive · erase · purge (settled runs
 past their retention) · dispatcher
(outbox -> mail and webhooks) · doctor (invariant checks).
"""

from __future__ import annotations

from .cancel import CancelResult, cancel_run
from .due_scan import DueScanResult, due_scan, start_cron_runs
from .enqueue import enqueue_due, enqueue_matched
from .ingest import IngestResult, ingest_domain_event, ingest_domain_events, start_cron_run
from .passes import load_run
from .persist import RunOutcome
from .projection import PENDING_PROJECTION, CatchUpPacer, ProjectionResult, project_pending
from .resume import ResumeRequestItem, ResumeResult, resume_run, resume_runs
from .run_starts import start_run
from .wakeup import (
    EventMatches,
    WakeupBatch,
    WakeupResult,
    WokenRun,
    wake_and_enqueue,
    wake_and_enqueue_many,
    wake_on_event,
)

__all__ = [
    "PENDING_PROJECTION",
    "CancelResult",
    "CatchUpPacer",
    "DueScanResult",
    "EventMatches",
    "IngestResult",
    "ProjectionResult",
    "ResumeRequestItem",
    "ResumeResult",
    "RunOutcome",
    "WakeupBatch",
    "WakeupResult",
    "WokenRun",
    "cancel_run",
    "due_scan",
    "enqueue_due",
    "enqueue_matched",
    "ingest_domain_event",
    "ingest_domain_events",
    "load_run",
    "project_pending",
    "resume_run",
    "resume_runs",
    "start_cron_run",
    "start_cron_runs",
    "start_run",
    "wake_and_enqueue",
    "wake_and_enqueue_many",
    "wake_on_event",
]
