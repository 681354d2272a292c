"""Deliveries for operators: find failed or stuck mail and webhook deliveries across
tenants, and deliver a failed one again (`wfr dispatches`, the console, `wfr doctor`).

A delivery that a run waits for (a mail or webhook step with result_key) is a task:
when it fails for good its run fails (or catches it), and the remedy is to redrive the
run. A fire-and-forget delivery fails on its own: redelivering it appends a new
request to its dispatch stream and gives it a fresh attempt budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from ..errors import WorkflowRunnerError
from ..store import OutboxRow, Store
from ..stream import DISPATCH_STREAM, DispatchRequested

DeliveryFilter = Literal["failed", "stuck", "pending"]
# A pending delivery this much past its due time is stuck: no dispatcher is running.
STUCK_AFTER = timedelta(minutes=10)


class RedeliveryRefused(WorkflowRunnerError):
    """The request cannot be delivered again; the message says why."""


@dataclass(frozen=True)
class RedeliveryResult:
    tenant_id: str
    request_id: str
    run_id: str
    step_kind: str


def list_deliveries(
    store: Store,
    status: DeliveryFilter,
    now: datetime,
    since: timedelta = timedelta(days=1),
    tenant_id: str | None = None,
    limit: int = 100,
    before: tuple[datetime, str] | None = None,
) -> list[OutboxRow]:
    """Fire-and-forget deliveries across tenants (or of one), newest first.

    Args:
        status: failed (settled as failed within `since`), stuck (pending and more than
            STUCK_AFTER past due, or with a lease that ended long ago) or pending.
        before: (created_at, request_id) of the last row of the previous page.
    """
    return store.outbox.find(
        status, now - since, now - STUCK_AFTER, tenant_id=tenant_id, limit=limit, before=before
    )


def redeliver(store: Store, tenant_id: str, request_id: str, now: datetime) -> RedeliveryResult:
    """Deliver a failed fire-and-forget request again, with a fresh attempt budget.

    One transaction: the request's stream gets a new `step.dispatch-requested`
    (redelivery n) and its outbox row is due at once; the Idempotency-Key stays the
    request id, so a webhook receiver that did get it can drop the repeat.

    Raises:
        RedeliveryRefused: no such request for this tenant, not failed, or its payload
            is no longer stored (delivered requests and erased ones keep none).
    """
    with store.transaction():
        row = store.outbox.get(tenant_id, request_id)
        if row is None:
            raise RedeliveryRefused(f"no delivery {request_id} for tenant {tenant_id}")
        if row.status != "failed":
            raise RedeliveryRefused(f"delivery {request_id} is {row.status}; only failed ones")
        if row.request is None:
            raise RedeliveryRefused(
                f"delivery {request_id} keeps no request any more (erased, or failed before "
                "release 0.2): it cannot be sent again"
            )
        events = store.streams.load(tenant_id, request_id)
        first = events[0].fact if events else None
        if not isinstance(first, DispatchRequested):
            raise RedeliveryRefused(f"delivery {request_id} has no request on its stream")
        version = events[-1].version
        redeliveries = sum(1 for e in events if isinstance(e.fact, DispatchRequested))
        again = DispatchRequested(
            request_id=first.request_id,
            run_id=first.run_id,
            workflow_name=first.workflow_name,
            step_kind=first.step_kind,
            step_index=first.step_index,
            path=first.path,
            redelivery=redeliveries,
        )
        if not store.streams.append(tenant_id, request_id, DISPATCH_STREAM, version, [again], now):
            raise RedeliveryRefused(f"delivery {request_id} changed meanwhile; try again")
        if not store.outbox.redeliver(tenant_id, request_id, version + 1, now):
            raise RedeliveryRefused(f"delivery {request_id} changed meanwhile; try again")
    return RedeliveryResult(tenant_id, request_id, row.run_id, row.step_kind)
