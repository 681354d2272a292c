"""Facts a task's worker records on the run stream: failed attempts and the outcome.

They are appended while the run is suspended at the task (TaskScheduled), so they
never race a pass for the stream's next version: the run cannot move until the
outcome is there (a cancel can, and then the worker's append loses and is dropped).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from ..durations import format_instant
from ..fast_init import fast_init
from .names import TASK_ATTEMPT_FAILED, TASK_COMPLETED, TASK_FAILED, instant, optional


@fast_init
@dataclass(frozen=True, kw_only=True)
class TaskAttemptFailed:
    """One attempt failed and another follows at `retry_at` (never raw error text)."""

    TYPE: ClassVar[str] = TASK_ATTEMPT_FAILED

    task_key: str
    task_id: str
    suspension_version: int  # the TaskScheduled this attempt belongs to
    attempt: int
    error: str  # workflow step failed (<ErrorClass>)
    error_class: str
    retry_at: datetime | None = None
    status: int | None = None  # the HTTP status of a webhook task

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "taskKey": self.task_key,
            "taskId": self.task_id,
            "suspensionVersion": self.suspension_version,
            "attempt": self.attempt,
            "error": self.error,
            "errorClass": self.error_class,
        }
        optional(
            payload, "retryAt", None if self.retry_at is None else format_instant(self.retry_at)
        )
        optional(payload, "status", self.status)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> TaskAttemptFailed:
        return cls(
            task_key=p["taskKey"],
            task_id=p["taskId"],
            suspension_version=int(p["suspensionVersion"]),
            attempt=int(p["attempt"]),
            error=str(p.get("error", "")),
            error_class=str(p.get("errorClass", "")),
            retry_at=instant(p["retryAt"]) if p.get("retryAt") else None,
            status=p.get("status"),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class TaskCompleted:
    """The task's result (JSON), recorded once; the next pass finds it under `task_key`."""

    TYPE: ClassVar[str] = TASK_COMPLETED

    task_key: str
    task_id: str
    suspension_version: int
    attempt: int
    result: Any = None
    redacted: bool = False
    # False: other tasks of the same parallel still run (the run is not due yet).
    run_due: bool = True

    def to_payload(self) -> dict[str, Any]:
        payload = {
            "taskKey": self.task_key,
            "taskId": self.task_id,
            "suspensionVersion": self.suspension_version,
            "attempt": self.attempt,
            "result": self.result,
        }
        if self.redacted:
            payload["redacted"] = True
        if not self.run_due:
            payload["runDue"] = False
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> TaskCompleted:
        return cls(
            task_key=p["taskKey"],
            task_id=p["taskId"],
            suspension_version=int(p["suspensionVersion"]),
            attempt=int(p["attempt"]),
            result=p.get("result"),
            redacted=bool(p.get("redacted", False)),
            run_due=bool(p.get("runDue", True)),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class TaskFailed:
    """The task failed for good: attempts used up, a non-retryable error, a refused
    destination, a result that cannot be stored, or an ambiguous mail delivery."""

    TYPE: ClassVar[str] = TASK_FAILED

    task_key: str
    task_id: str
    suspension_version: int
    attempts: int
    error: str  # workflow step failed (<ErrorClass>)
    error_class: str
    reason: str  # attempts_exhausted | non_retryable | refused | result_not_storable | ambiguous
    status: int | None = None
    run_due: bool = True  # as TaskCompleted.run_due

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "taskKey": self.task_key,
            "taskId": self.task_id,
            "suspensionVersion": self.suspension_version,
            "attempts": self.attempts,
            "error": self.error,
            "errorClass": self.error_class,
            "reason": self.reason,
        }
        optional(payload, "status", self.status)
        if not self.run_due:
            payload["runDue"] = False
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> TaskFailed:
        return cls(
            task_key=p["taskKey"],
            task_id=p["taskId"],
            suspension_version=int(p["suspensionVersion"]),
            attempts=int(p.get("attempts") or 0),
            error=str(p.get("error", "")),
            error_class=str(p.get("errorClass", "")),
            reason=str(p.get("reason", "")),
            status=p.get("status"),
            run_due=bool(p.get("runDue", True)),
        )


TaskOutcome = TaskCompleted | TaskFailed
