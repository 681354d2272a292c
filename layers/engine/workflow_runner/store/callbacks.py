"""Callback tokens handed out by wait_for_callback steps (`callbacks`): hashes only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from .sql import Sql


@dataclass(frozen=True)
class NewCallback:
    """A token a suspending pass handed out (its SHA-256)."""

    tenant_id: str
    token_hash: str
    run_id: str
    workflow_name: str
    suspension_version: int
    step_index: int
    path: list[dict[str, Any]]
    expires_at: datetime


@dataclass(frozen=True)
class CallbackRow:
    """A token's row: the suspension it completes, until when, and its completion."""

    token_hash: str
    tenant_id: str
    run_id: str
    workflow_name: str
    suspension_version: int
    step_index: int
    path: list[dict[str, Any]]
    expires_at: datetime
    created_at: datetime
    completed_at: datetime | None
    completion_event_id: str | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> CallbackRow:
        return cls(
            token_hash=row["token_hash"],
            tenant_id=row["tenant_id"],
            run_id=row["run_id"],
            workflow_name=row["workflow_name"],
            suspension_version=row["suspension_version"],
            step_index=row["step_index"],
            path=list(row["path"] or []),
            expires_at=row["expires_at"],
            created_at=row["created_at"],
            completed_at=row["completed_at"],
            completion_event_id=row["completion_event_id"],
        )


class CallbackStore:
    """Record, find and complete callback tokens."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def insert(self, callback: NewCallback, now: datetime) -> None:
        """Record a token in the pass that handed it out."""
        params = dict(callback.__dict__)
        params.update(path=Jsonb(callback.path), now=now)
        self._sql.run("insert_callback", params)

    def lock(self, token_hash: str) -> CallbackRow | None:
        """A token's row, locked for the caller's transaction (None: no such token).

        The only lookup without a tenant: the token decides the tenant.
        """
        row = self._sql.one("lock_callback", {"token_hash": token_hash})
        return None if row is None else CallbackRow.from_row(row)

    def mark_completed(self, tenant_id: str, token_hash: str, event_id: str, now: datetime) -> bool:
        """Record a token's completion; False when it was completed before."""
        touched = self._sql.run(
            "mark_callback_completed",
            {"tenant_id": tenant_id, "token_hash": token_hash, "event_id": event_id, "now": now},
        )
        return touched == 1

    def move(
        self,
        tenant_id: str,
        run_id: str,
        suspension_version: int,
        step_index: int,
        path: list[dict[str, Any]],
    ) -> None:
        """Point the tokens of a migrated run's open suspension at the step it moved to
        (locks their rows until the transaction ends)."""
        self._sql.run(
            "migrate_callbacks",
            {
                "tenant_id": tenant_id,
                "run_id": run_id,
                "suspension_version": suspension_version,
                "step_index": step_index,
                "path": Jsonb(path),
            },
        )

    def of_run(self, tenant_id: str, run_id: str) -> list[CallbackRow]:
        """The tokens a run handed out, newest first."""
        rows = self._sql.all("run_callbacks", {"tenant_id": tenant_id, "run_id": run_id})
        return [CallbackRow.from_row(r) for r in rows]
