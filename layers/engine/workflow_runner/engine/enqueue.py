"""Hand pending rows to the resume queue: leased first, delayed to the second.

The lease (`workflow_run_pending.leased_until`) keeps a row that is in flight from
being handed out twice. It must outlast the longest SQS delay plus the queue's
visibility timeout; when it ends without the run having moved (a ResumeRun that
crashed, a message that went to the DLQ), the row is due again and the next scan
retries it, which is safe because a resume claims with optimistic concurrency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from ..ports import ResumeQueue, ResumeRequest
from ..store import DueRow, Store

MAX_DELAY_SECONDS = 900  # the SQS DelaySeconds ceiling
DEFAULT_LEASE_SECONDS = 1200


class SuspensionRef(Protocol):
    """Names one suspension of a run (a woken wait, a due row)."""

    @property
    def tenant_id(self) -> str: ...

    @property
    def run_id(self) -> str: ...

    @property
    def step_index(self) -> int: ...


def delay_for(wake_at: datetime, now: datetime, early_seconds: float = 0.0) -> int:
    """Seconds to delay a resume request so it arrives at `wake_at` (0..900, whole
    seconds): rounded up, so never early; with `early_seconds` > 0 (the consumer holds
    early requests), up to that much early instead of up to a second late."""
    seconds = math.ceil((wake_at - now).total_seconds() - early_seconds)
    return max(0, min(MAX_DELAY_SECONDS, seconds))


def early_seconds_of(queue: ResumeQueue) -> float:
    """How early the queue's consumer accepts requests (see ResumeQueue); 0 by default."""
    return float(getattr(queue, "early_seconds", 0.0))


def send_leased(
    store: Store,
    queue: ResumeQueue,
    rows: Sequence[DueRow],
    now: datetime,
    lease_until: datetime,
) -> tuple[int, int]:
    """Send leased rows to the queue, soonest first; release the lease of those it
    refused (the due scan retries them). Returns (sent, refused)."""
    early = early_seconds_of(queue)
    requests = [
        ResumeRequest(
            tenant_id=row.tenant_id,
            run_id=row.run_id,
            step_index=row.step_index,
            delay_seconds=delay_for(row.wake_at, now, early),
            wake_at=row.wake_at,
        )
        for row in sorted(rows, key=lambda r: (r.wake_at, r.run_id))
    ]
    refused = queue.send(requests) if requests else []
    for request in refused:
        store.pending.release(request.tenant_id, request.run_id, request.step_index, lease_until)
    return len(requests) - len(refused), len(refused)


def enqueue_due(
    store: Store,
    queue: ResumeQueue,
    runs: Sequence[SuspensionRef],
    now: datetime,
    lease_seconds: int = DEFAULT_LEASE_SECONDS,
) -> tuple[int, int]:
    """Send named runs to the resume queue at once, delayed to their wake time: those
    an awaited event just woke, or new suspensions due within the scan horizon.

    Each row is leased first so the next due scan does not send it again; a row
    whose lease is taken is already on its way.

    Returns:
        (sent, refused) counts; refused rows keep no lease and the due scan retries them.
    """
    lease_until = now + timedelta(seconds=lease_seconds)
    leased = [
        row
        for run in runs
        if (row := store.pending.lease(run.tenant_id, run.run_id, run.step_index, now, lease_until))
        is not None
    ]
    return send_leased(store, queue, leased, now, lease_until)
