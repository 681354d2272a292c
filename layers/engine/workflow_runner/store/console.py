"""Read-only queries of the operator console and `wfr runs list` across tenants.

Lists are keyset pages, newest change first on (updated_at, tenant_id, run_id) for runs
and soonest first on (wake_at, tenant_id, run_id) for pending rows: the caller passes
the last row of the previous page (or nothing for the first page). Tenant filters are
optional here on purpose: an operator looks across tenants; every row names its tenant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .pending_rows import PendingRow
from .runs import RunSummary
from .sql import Sql

# Bounds that stand for "no bound", so that every keyset and time condition stays an
# index condition (a NULL would turn it into a filter in a generic plan).
_EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
_LATEST = datetime.max.replace(tzinfo=UTC)  # after NEVER, a task suspension's wake time
_MAX_UUID = "ffffffff-ffff-ffff-ffff-ffffffffffff"
_MIN_UUID = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class RunKey:
    """Where a page of runs ends: the last row's (updated_at, tenant_id, run_id)."""

    updated_at: datetime
    tenant_id: str
    run_id: str


@dataclass(frozen=True)
class PendingKey:
    """Where a page of pending rows ends: the last row's (wake_at, tenant_id, run_id)."""

    wake_at: datetime
    tenant_id: str
    run_id: str


@dataclass(frozen=True)
class RunQuery:
    """Filters of a runs page; None means "any". `fingerprints`: the definition
    fingerprints of `workflow_version`, matched on rows that have no version recorded."""

    statuses: Sequence[str]
    workflow_name: str | None = None
    workflow_version: int | None = None
    fingerprints: Sequence[str] = ()
    tenant_id: str | None = None
    run_ids: Sequence[str] | None = None
    since: datetime | None = None
    until: datetime | None = None


def _pending_row(r: dict[str, Any]) -> PendingRow:
    return PendingRow(
        tenant_id=r["tenant_id"],
        run_id=r["run_id"],
        step_index=r["step_index"],
        workflow_name=r["workflow_name"],
        suspension_event_type=r["suspension_event_type"],
        wake_at=r["wake_at"],
        retry_attempt=r["retry_attempt"],
        wait_event_type=r["wait_event_type"],
        match_expr=r["match_expr"],
        awaited_event_id=r["awaited_event_id"],
        suspension_version=r["suspension_version"],
        leased_until=r["leased_until"],
    )


class ConsoleStore:
    """Runs and pending rows, as an operator browses them."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def runs(self, query: RunQuery, after: RunKey | None, limit: int) -> list[RunSummary]:
        """One page of runs matching `query`, newest change first, after `after`.

        The access path follows the most selective filter given: run ids (an
        idempotency key), else the tenant, else the workflow, else the statuses alone.
        """
        params: dict[str, Any] = {
            "statuses": list(query.statuses),
            "workflow_name": query.workflow_name,
            "workflow_version": query.workflow_version,
            "fingerprints": list(query.fingerprints),
            "tenant_id": query.tenant_id,
            "run_ids": list(query.run_ids or []),
            "since": query.since or _EARLIEST,
            "until": query.until or _LATEST,
            "before_at": after.updated_at if after else _LATEST,
            "before_tenant": after.tenant_id if after else _MAX_UUID,
            "before_run": after.run_id if after else _MAX_UUID,
            "limit": limit,
        }
        if query.run_ids is not None:
            name = "console_runs_by_ids"
        elif query.tenant_id is not None and query.workflow_name is None:
            name = "console_runs_by_tenant"
        elif query.workflow_name is not None:
            name = "console_runs_by_workflow"
        else:
            name = "console_runs_by_status"
        return [RunSummary.from_row(r) for r in self._sql.all(name, params)]

    def runs_in_id_range(
        self, low: str, high: str, tenant_id: str | None, limit: int
    ) -> list[RunSummary]:
        """Runs whose id is between `low` and `high` (UUIDs), in id order."""
        rows = self._sql.all(
            "console_runs_in_id_range",
            {"low": low, "high": high, "tenant_id": tenant_id, "limit": limit},
        )
        return [RunSummary.from_row(r) for r in rows]

    def workflow_names(self) -> list[str]:
        """The names of the workflows that have runs, sorted."""
        return [r["workflow_name"] for r in self._sql.all("console_workflow_names", {})]

    def pending(
        self,
        tenant_id: str | None,
        workflow_name: str | None,
        due_before: datetime | None,
        after: PendingKey | None,
        limit: int,
    ) -> list[PendingRow]:
        """One page of pending rows (of every tenant, or one), soonest first."""
        rows = self._sql.all(
            "console_pending",
            {
                "tenant_id": tenant_id,
                "workflow_name": workflow_name,
                "due_before": due_before or _LATEST,
                "after_at": after.wake_at if after else _EARLIEST,
                "after_tenant": after.tenant_id if after else _MIN_UUID,
                "after_run": after.run_id if after else _MIN_UUID,
                "limit": limit,
            },
        )
        return [_pending_row(r) for r in rows]

    def pending_of_run(self, tenant_id: str, run_id: str) -> list[PendingRow]:
        """The run's pending row (a list: empty when it has none)."""
        rows = self._sql.all("console_pending_of_run", {"tenant_id": tenant_id, "run_id": run_id})
        return [_pending_row(r) for r in rows]
