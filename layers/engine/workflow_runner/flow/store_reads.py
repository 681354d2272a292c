"""What operators see of flow control (wfr limits, wfr runs list --skipped, runs show,
the console's Limits page and the LimitQueued metric): the read side of FlowStore,
which mixes this in."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..store.sql import Sql


@dataclass(frozen=True)
class LimitRow:
    """One limit key as operators see it."""

    flow_key: str
    kind: str
    tenant_id: str | None
    workflow_name: str
    step_key: str | None
    key_value: str
    limit: int
    period_ms: int
    burst: int
    next_turn: datetime | None
    in_flight: int
    queued: int
    oldest_queued_at: datetime | None
    updated_at: datetime


@dataclass(frozen=True)
class SkippedTrigger:
    """A trigger event that started nothing, and why."""

    tenant_id: str
    event_id: str
    workflow_name: str
    reason: str
    flow_key: str
    detail: str
    run_id: str | None
    skipped_at: datetime


@dataclass(frozen=True)
class RunWait:
    """What holds one run back: its place in a key's queue."""

    flow_key: str
    work: str
    step_index: int
    queued_at: datetime
    woken_at: datetime | None
    ahead: int


class FlowReads:
    """Limit keys, skipped triggers and what holds a run back; named queries only."""

    _sql: Sql

    def skipped(
        self, tenant_id: str | None = None, workflow: str | None = None, limit: int = 100
    ) -> list[SkippedTrigger]:
        rows = self._sql.all(
            "flow_list_skipped", {"tenant_id": tenant_id, "workflow": workflow, "limit": limit}
        )
        return [
            SkippedTrigger(
                r["tenant_id"],
                r["event_id"],
                r["workflow_name"],
                r["reason"],
                r["flow_key"],
                r["detail"],
                r["run_id"],
                r["skipped_at"],
            )
            for r in rows
        ]

    def limits(
        self,
        now: datetime,
        tenant_id: str | None = None,
        workflow: str | None = None,
        limit: int = 500,
    ) -> list[LimitRow]:
        rows = self._sql.all(
            "flow_list_limits",
            {"now": now, "tenant_id": tenant_id, "workflow": workflow, "limit": limit},
        )
        return [
            LimitRow(
                flow_key=r["flow_key"],
                kind=r["kind"],
                tenant_id=r["tenant_id"],
                workflow_name=r["workflow_name"],
                step_key=r["step_key"],
                key_value=r["key_value"],
                limit=r["lim"],
                period_ms=r["period_ms"],
                burst=r["burst"],
                next_turn=r["tat"],
                in_flight=r["in_flight"],
                queued=r["queued"],
                oldest_queued_at=r["oldest_queued_at"],
                updated_at=r["updated_at"],
            )
            for r in rows
        ]

    def run_waits(self, tenant_id: str, run_id: str) -> list[RunWait]:
        rows = self._sql.all("flow_run_waits", {"tenant_id": tenant_id, "run_id": run_id})
        return [
            RunWait(
                r["flow_key"], r["work"], r["step_index"], r["queued_at"], r["woken_at"], r["ahead"]
            )
            for r in rows
        ]

    def run_turns(self, tenant_id: str, run_id: str, now: datetime) -> list[tuple[str, datetime]]:
        """(task key, its throttle turn) of a run's attempts waiting for their turn."""
        rows = self._sql.all(
            "flow_run_turns", {"tenant_id": tenant_id, "run_id": run_id, "now": now}
        )
        return [(r["task_key"], r["flow_ticket"]) for r in rows]

    def queued_by_workflow(self) -> list[tuple[str, int, datetime]]:
        """(workflow, work held for a slot, since when the oldest waits)."""
        rows = self._sql.all("flow_queued_by_workflow", {})
        return [(r["workflow_name"], r["queued"], r["oldest"]) for r in rows]
