"""Callback tokens handed out by wait_for_callback and create_callback steps
(`callbacks`): hashes only, never tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from ..stream import CallbackTimer, callback_deadline
from .sql import Sql


@dataclass(frozen=True)
class NewCallback:
    """A token a pass handed out (its SHA-256): a wait_for_callback's, or a created
    callback's (`name`, and `mint`: what its token is derived from with the run's secret).
    `closed_reason` "superseded": created again by the same pass, closed at once."""

    tenant_id: str
    token_hash: str
    run_id: str
    workflow_name: str
    suspension_version: int
    step_index: int
    path: list[dict[str, Any]]
    expires_at: datetime
    name: str | None = None
    mint: str | None = None
    heartbeat_seconds: int | None = None
    closed_reason: str | None = None


@dataclass(frozen=True)
class CallbackRow:
    """A token's row: the suspension it completes (or the callback it names), until
    when, its heartbeats, and its answer or closure."""

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
    name: str | None = None
    mint: str | None = None
    heartbeat_seconds: int | None = None
    last_heartbeat_at: datetime | None = None
    failed_error: str | None = None
    closed_at: datetime | None = None
    closed_reason: str | None = None

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
            name=row["name"],
            mint=row["mint"],
            heartbeat_seconds=row["heartbeat_seconds"],
            last_heartbeat_at=row["last_heartbeat_at"],
            failed_error=row["failed_error"],
            closed_at=row["closed_at"],
            closed_reason=row["closed_reason"],
        )

    @property
    def deadline(self) -> tuple[datetime, CallbackTimer]:
        """Until when it takes answers, and which timer ends it then."""
        last_beat = self.last_heartbeat_at or self.created_at
        return callback_deadline(self.expires_at, self.heartbeat_seconds, last_beat)


@dataclass(frozen=True)
class CreatedCallbackRow:
    """A created callback as a later step finds it: its row and its answer's payload
    (`answer_erased`: the payload was erased)."""

    row: CallbackRow
    answer: Any
    answer_erased: bool


class CallbackStore:
    """Record, find, answer and close callback tokens."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def insert(self, callback: NewCallback, now: datetime) -> None:
        """Record a token in the pass that handed it out; a created callback closes the
        run's earlier ones of its name."""
        params = dict(callback.__dict__)
        params.update(
            path=Jsonb(callback.path),
            now=now,
            closed_at=now if callback.closed_reason else None,
        )
        self._sql.run("insert_callback", params)
        if callback.name is not None and callback.closed_reason is None:
            self._sql.run(
                "supersede_callbacks",
                {
                    "tenant_id": callback.tenant_id,
                    "run_id": callback.run_id,
                    "name": callback.name,
                    "token_hash": callback.token_hash,
                    "now": now,
                },
            )

    def get(self, token_hash: str) -> CallbackRow | None:
        """A token's row (None: no such token). The only lookup without a tenant: the
        token decides the tenant."""
        row = self._sql.one("callback_by_hash", {"token_hash": token_hash})
        return None if row is None else CallbackRow.from_row(row)

    def mark_answered(
        self,
        tenant_id: str,
        token_hash: str,
        event_id: str,
        now: datetime,
        error: str | None = None,
    ) -> bool:
        """Record a token's answer (`error`: it reported a failure); False when it was
        answered before."""
        touched = self._sql.run(
            "mark_callback_completed",
            {
                "tenant_id": tenant_id,
                "token_hash": token_hash,
                "event_id": event_id,
                "error": error,
                "now": now,
            },
        )
        return touched == 1

    def record_heartbeat(self, tenant_id: str, token_hash: str, now: datetime) -> None:
        self._sql.run(
            "record_callback_heartbeat",
            {"tenant_id": tenant_id, "token_hash": token_hash, "now": now},
        )

    def close(self, tenant_id: str, token_hash: str, reason: str, now: datetime) -> None:
        """The run stopped listening to a callback without an answer (`reason`: timeout,
        heartbeat_timeout, moved_on); nothing for one that has an answer or was closed."""
        self._sql.run(
            "close_callback",
            {"tenant_id": tenant_id, "token_hash": token_hash, "reason": reason, "now": now},
        )

    def created_of_run(self, tenant_id: str, run_id: str) -> list[CreatedCallbackRow]:
        """The run's created callbacks later steps see: the newest of each name, with
        its answer's payload."""
        rows = self._sql.all("created_callbacks", {"tenant_id": tenant_id, "run_id": run_id})
        return [
            CreatedCallbackRow(
                CallbackRow.from_row(r), r["answer"], r["answer_erased_at"] is not None
            )
            for r in rows
        ]

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
        rows = self._sql.all("callbacks_of_run", {"tenant_id": tenant_id, "run_id": run_id})
        return [CallbackRow.from_row(r) for r in rows]

    def open_of_tenant(self, tenant_id: str, limit: int = 1000) -> list[CallbackRow]:
        """A tenant's callbacks without an answer of runs that wait, soonest deadline
        first."""
        rows = self._sql.all("open_callbacks_of_tenant", {"tenant_id": tenant_id, "limit": limit})
        return [CallbackRow.from_row(r) for r in rows]
