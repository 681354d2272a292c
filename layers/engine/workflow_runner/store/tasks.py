"""The queue of tasks runs wait for (`task_queue`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeAlias

from psycopg.types.json import Jsonb

from .sql import Sql

TaskStatus: TypeAlias = Literal["pending", "running", "completed", "failed", "cancelled"]


@dataclass(frozen=True)
class NewTask:
    """A task a pass scheduled."""

    tenant_id: str
    task_id: str
    run_id: str
    workflow_name: str
    definition_fingerprint: str
    task_key: str
    step_kind: str
    path: list[dict[str, Any]]
    scope: dict[str, Any]
    request: dict[str, Any] | None
    max_attempts: int
    timeout_ms: int | None
    limits: list[dict[str, Any]] | None = None  # flow control (flow/store.py LimitSpec)


@dataclass(frozen=True)
class ClaimedTask:
    """A task a worker leased for one attempt; `lost_attempt` is True when the previous
    attempt's worker died (its lease ran out while it was running)."""

    tenant_id: str
    task_id: str
    run_id: str
    workflow_name: str
    definition_fingerprint: str
    task_key: str
    step_kind: str
    path: list[dict[str, Any]]
    scope: dict[str, Any]
    request: dict[str, Any] | None
    attempt: int
    max_attempts: int
    timeout_ms: int | None
    leased_until: datetime
    lost_attempt: bool
    limits: list[dict[str, Any]] | None = None  # flow control (flow/store.py LimitSpec)
    flow_ticket: datetime | None = None  # the throttle turn its attempt reserved


@dataclass(frozen=True)
class TaskRow:
    """A task row as operators see it."""

    tenant_id: str
    task_id: str
    run_id: str
    workflow_name: str
    task_key: str
    step_kind: str
    status: TaskStatus
    attempts: int
    max_attempts: int
    next_attempt_at: datetime
    leased_until: datetime | None
    last_error: str | None
    created_at: datetime
    settled_at: datetime | None


class TaskStore:
    """Schedule, claim and settle tasks."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def insert(self, task: NewTask, now: datetime) -> None:
        """Record a task in the pass that scheduled it (a repeated id is kept once)."""
        params = dict(task.__dict__)
        params.update(
            path=Jsonb(task.path),
            scope=Jsonb(task.scope),
            request=None if task.request is None else Jsonb(task.request),
            limits=None if task.limits is None else Jsonb(task.limits),
            now=now,
        )
        self._sql.run("insert_task", params)

    def claim(
        self, now: datetime, max_ms: int, default_ms: int, margin_s: float
    ) -> ClaimedTask | None:
        """Lease the oldest due task whose attempt (timeout, `default_ms` for deliveries)
        fits in `max_ms`, for its timeout plus `margin_s`."""
        row = self._sql.one(
            "claim_task",
            {"now": now, "max_ms": max_ms, "default_ms": default_ms, "margin_s": margin_s},
        )
        return None if row is None else _claimed(row)

    def adopt(
        self, tenant_id: str, task_id: str, attempt: int, now: datetime
    ) -> ClaimedTask | None:
        """A claim another worker took and handed here, while it still holds the row
        (attempt `attempt`, lease not ended); None when it no longer does."""
        row = self._sql.one(
            "adopt_task",
            {"tenant_id": tenant_id, "task_id": task_id, "attempt": attempt, "now": now},
        )
        return None if row is None else _claimed(row)

    def retry(self, task: ClaimedTask, next_attempt_at: datetime, error: str) -> None:
        """Schedule the next attempt (only while this claim holds the row)."""
        self._sql.run(
            "retry_task",
            {
                "tenant_id": task.tenant_id,
                "task_id": task.task_id,
                "attempt": task.attempt,
                "next_attempt_at": next_attempt_at,
                "error": error,
            },
        )

    def settle(
        self,
        tenant_id: str,
        task_id: str,
        status: Literal["completed", "failed", "cancelled"],
        now: datetime,
        error: str | None = None,
    ) -> None:
        """Close a task for good and drop its request and scope."""
        self._sql.run(
            "settle_task",
            {
                "tenant_id": tenant_id,
                "task_id": task_id,
                "status": status,
                "now": now,
                "error": error,
            },
        )

    def release(self, task: ClaimedTask, due_at: datetime, error: str | None = None) -> None:
        """Give a claimed row back unstarted (its attempt not counted), due at `due_at`
        (only while this claim holds the row); `error`: the last one, if it changed."""
        self._sql.run(
            "release_task",
            {
                "tenant_id": task.tenant_id,
                "task_id": task.task_id,
                "attempt": task.attempt,
                "next_attempt_at": due_at,
                "error": error,
            },
        )

    def move(
        self,
        tenant_id: str,
        run_id: str,
        paths: Sequence[tuple[str, list[dict[str, Any]]]],
        fingerprint: str,
    ) -> None:
        """Point a migrated run's tasks, (task_id, path) each, at their step's place on
        definition `fingerprint`."""
        if not paths:
            return
        self._sql.run(
            "migrate_tasks",
            {
                "tenant_id": tenant_id,
                "run_id": run_id,
                "moves": Jsonb([{"task_id": task_id, "path": path} for task_id, path in paths]),
                "fingerprint": fingerprint,
            },
        )

    def cancel_for_run(self, tenant_id: str, run_id: str, now: datetime) -> None:
        """Stop the open tasks of a run that ended (cancelled)."""
        self._sql.run("cancel_run_tasks", {"tenant_id": tenant_id, "run_id": run_id, "now": now})

    def get(self, tenant_id: str, task_id: str) -> TaskRow | None:
        row = self._sql.one("get_task", {"tenant_id": tenant_id, "task_id": task_id})
        return None if row is None else _task_row(row)

    def find(
        self,
        status: Literal["failed", "stuck"],
        since: datetime,
        stuck_before: datetime,
        tenant_id: str | None = None,
        limit: int = 100,
    ) -> list[TaskRow]:
        """Failed tasks (settled since `since`) or stuck ones (open, due before
        `stuck_before`), across tenants or of one, newest first."""
        rows = self._sql.all(
            "find_tasks",
            {
                "status": status,
                "since": since,
                "stuck_before": stuck_before,
                "tenant_id": tenant_id,
                "limit": limit,
            },
        )
        return [_task_row(r) for r in rows]

    def next_due(self) -> datetime | None:
        """When the earliest open task is due (None: none is open)."""
        row = self._sql.one("next_task_due", {})
        return None if row is None else row["due"]


def _claimed(row: dict[str, Any]) -> ClaimedTask:
    return ClaimedTask(
        tenant_id=row["tenant_id"],
        task_id=row["task_id"],
        run_id=row["run_id"],
        workflow_name=row["workflow_name"],
        definition_fingerprint=row["definition_fingerprint"],
        task_key=row["task_key"],
        step_kind=row["step_kind"],
        path=list(row["path"]),
        scope=dict(row["scope"] or {}),
        request=row["request"],
        attempt=int(row["attempts"]),
        max_attempts=int(row["max_attempts"]),
        timeout_ms=row["timeout_ms"],
        leased_until=row["leased_until"],
        lost_attempt=row["was"] == "running",
        limits=row.get("flow"),
        flow_ticket=row.get("flow_ticket"),
    )


def _task_row(row: dict[str, Any]) -> TaskRow:
    return TaskRow(
        tenant_id=row["tenant_id"],
        task_id=row["task_id"],
        run_id=row["run_id"],
        workflow_name=row["workflow_name"],
        task_key=row["task_key"],
        step_kind=row["step_kind"],
        status=row["status"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        next_attempt_at=row["next_attempt_at"],
        leased_until=row["leased_until"],
        last_error=row["last_error"],
        created_at=row["created_at"],
        settled_at=row["settled_at"],
    )
