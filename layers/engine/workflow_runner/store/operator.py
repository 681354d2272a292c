"""Queries an operator needs to check the engine's invariants (`wfr doctor`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

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
class PinnedRunGroup:
    """Suspended runs of one workflow, pinned to one definition fingerprint, waiting at
    one step; `tenants` counts the tenants of the fingerprint across all its steps."""

    workflow_name: str
    definition_fingerprint: str
    step_index: int
    suspension_event_type: str
    runs: int
    tenants: int
    example_tenant_id: str
    example_run_id: str
    path: list[dict[str, Any]] = field(default_factory=list)  # where in the step tree


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

    def pinned_run_groups(self, tenant_id: str | None) -> list[PinnedRunGroup]:
        """Suspended runs by workflow, definition fingerprint and step (the pending rows)."""
        rows = self._sql.all("doctor_pinned_definitions", {"tenant_id": tenant_id})
        groups = []
        for r in rows:
            example_tenant, _, example_run = str(r["example"]).partition(" ")
            groups.append(
                PinnedRunGroup(
                    r["workflow_name"],
                    r["definition_fingerprint"],
                    int(r["step_index"]),
                    r["suspension_event_type"],
                    int(r["runs"]),
                    int(r["tenants"]),
                    example_tenant,
                    example_run,
                    list(r["path"] or []),
                )
            )
        return groups
