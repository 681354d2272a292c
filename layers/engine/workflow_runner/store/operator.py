"""Queries an operator needs to check the engine's invariants (`wfr doctor`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .sql import Sql


@dataclass(frozen=True)
class RunCheckRow:
    """A run a doctor check found; `unprojected`: the pending projection has not applied
    all of its events yet (lag, not a broken invariant)."""

    tenant_id: str
    run_id: str
    workflow_name: str
    status: str
    unprojected: bool
    step_index: int | None = None


@dataclass(frozen=True)
class ProjectionState:
    """How far the pending projection is behind the run streams."""

    behind: int
    checkpoint_at: datetime | None


@dataclass(frozen=True)
class FingerprintUse:
    """Waiting runs of one workflow pinned to one definition fingerprint."""

    workflow_name: str
    definition_fingerprint: str
    runs: int
    example_run_id: str
    example_tenant_id: str


class OperatorStore:
    """Read-only checks across tenants (`tenant_id` None: every tenant)."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def unsettled_without_pending(self, tenant_id: str | None) -> list[RunCheckRow]:
        """Runs neither settled nor holding a pending row (at most 1000)."""
        rows = self._sql.all("doctor_unsettled_without_pending", {"tenant_id": tenant_id})
        return [
            RunCheckRow(
                r["tenant_id"], r["run_id"], r["workflow_name"], r["status"], r["unprojected"]
            )
            for r in rows
        ]

    def settled_with_pending(self, tenant_id: str | None) -> list[RunCheckRow]:
        """Pending rows that belong to settled runs (at most 1000)."""
        rows = self._sql.all("doctor_settled_with_pending", {"tenant_id": tenant_id})
        return [
            RunCheckRow(
                r["tenant_id"],
                r["run_id"],
                r["workflow_name"],
                r["status"],
                r["unprojected"],
                step_index=r["step_index"],
            )
            for r in rows
        ]

    def projection_state(self) -> ProjectionState:
        row = self._sql.one("doctor_projection_state", {}) or {}
        return ProjectionState(int(row.get("behind") or 0), row.get("checkpoint_at"))

    def waiting_fingerprints(self, tenant_id: str | None) -> list[FingerprintUse]:
        rows = self._sql.all("doctor_waiting_fingerprints", {"tenant_id": tenant_id})
        return [
            FingerprintUse(
                r["workflow_name"],
                r["definition_fingerprint"] or "",
                int(r["runs"]),
                r["example_run_id"],
                r["example_tenant_id"],
            )
            for r in rows
        ]
