"""Hand pending rows to the resume queue: leased first, delayed to the second.

The lease (`workflow_run_pending.leased_until`) keeps a row that is in flight from
being handed out twice. It must outlast the longest SQS delay plus the queue's
visibility timeout; when it ends without the run having moved (a ResumeRun that
crashed, a message that went to the DLQ), the row is due again and the next scan
retries it, which is safe because a resume claims with optimistic concurrency.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from ..ports import ResumeQueue, ResumeRequest
from ..store import DueRow, Store

MAX_DELAY_SECONDS = 900  # the SQS DelaySeconds ceiling
DEFAULT_LEASE_SECONDS = 1200
# Rows leased per statement (then sent in SQS batches of ten).
LEASE_CHUNK = 500


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
    refused (the due scan retries them), and of all of them when sending raised (the
    caller fails; its retry finds them free). Returns (sent, refused).

    Called inside the transaction that leased the rows, a crash during the send rolls
    the leases back too, so nothing stays leased without having been sent; a request
    sent twice that way is harmless (the resume claims with optimistic concurrency).
    """
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
    try:
        refused = queue.send(requests) if requests else []
    except Exception:
        _release(store, requests, lease_until)
        raise
    _release(store, refused, lease_until)
    return len(requests) - len(refused), len(refused)


def _release(store: Store, requests: Sequence[ResumeRequest], lease_until: datetime) -> None:
    for request in requests:
        store.pending.release(request.tenant_id, request.run_id, request.step_index, lease_until)


def enqueue_due(
    store: Store,
    queue: ResumeQueue,
    runs: Sequence[SuspensionRef],
    now: datetime,
    lease_seconds: int = DEFAULT_LEASE_SECONDS,
) -> tuple[int, int]:
    """Send named runs to the resume queue at once, delayed to their wake time: those
    the projection's look-back just woke, or new suspensions due within the scan horizon.

    The rows are leased first, LEASE_CHUNK per statement, so the next due scan does not
    send them again; a row whose lease is taken is already on its way.

    Returns:
        (sent, refused) counts; refused rows keep no lease and the due scan retries them.
    """
    lease_until = now + timedelta(seconds=lease_seconds)
    named = list(dict.fromkeys((run.tenant_id, run.run_id, run.step_index) for run in runs))
    sent = refused = 0
    for start in range(0, len(named), LEASE_CHUNK):
        with store.transaction():
            leased = store.pending.lease_named(named[start : start + LEASE_CHUNK], now, lease_until)
            chunk_sent, chunk_refused = send_leased(store, queue, leased, now, lease_until)
        sent, refused = sent + chunk_sent, refused + chunk_refused
    return sent, refused


@dataclass(frozen=True)
class Enqueued:
    """What `enqueue_matched` sent; `complete` False: the time budget ended first."""

    sent: int
    refused: int
    complete: bool = True


def enqueue_matched(
    store: Store,
    queue: ResumeQueue,
    events: Mapping[str, Sequence[str]],
    now: datetime,
    lease_seconds: int = DEFAULT_LEASE_SECONDS,
    out_of_time: Callable[[], bool] = lambda: False,
) -> Enqueued:
    """Send every row awaited events matched whose lease is free to the resume queue.

    `events` names the events, event ids per tenant. What the database says is woken
    and not in flight, up to LEASE_CHUNK rows per tenant and transaction, all of them in
    one send: whoever matched them (this call, an earlier attempt whose enqueue never
    happened), they go out once per lease. It stops at the first refusal (the due scan
    retries those rows), and between chunks when `out_of_time` says so (the rest stays
    matched and free: running it again sends them).
    """
    lease_until = now + timedelta(seconds=lease_seconds)
    sent = refused = 0
    left = {tenant_id: list(ids) for tenant_id, ids in sorted(events.items()) if ids}
    while left:
        if sent and out_of_time():
            return Enqueued(sent, refused, complete=False)
        # Lease and send in one transaction: a crash in between leaves nothing leased.
        with store.transaction():
            leased = {
                tenant_id: store.pending.lease_matched(
                    tenant_id, ids, now, lease_until, LEASE_CHUNK
                )
                for tenant_id, ids in left.items()
            }
            rows = [row for tenant_rows in leased.values() for row in tenant_rows]
            chunk_sent, chunk_refused = send_leased(store, queue, rows, now, lease_until)
        sent, refused = sent + chunk_sent, refused + chunk_refused
        if chunk_refused:
            return Enqueued(sent, refused)
        left = {t: ids for t, ids in left.items() if len(leased[t]) == LEASE_CHUNK}
    return Enqueued(sent, refused)
