"""Facts of a dispatch request's stream (a fire-and-forget mail or webhook): requested
(version 1), a failed attempt per retry (since 0.2), then one outcome. A redelivery
asked for by an operator appends further attempts and another outcome."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from ..durations import format_instant
from ..fast_init import fast_init
from .names import (
    DISPATCH_ATTEMPT_FAILED,
    DISPATCH_FAILED,
    DISPATCH_REQUESTED,
    DISPATCHED,
    Path,
    instant,
    optional,
)


@fast_init
@dataclass(frozen=True, kw_only=True)
class DispatchRequested:
    """A pass asked for a mail or webhook (version 1 of the request's stream); again,
    with `redelivery`, when an operator asked to deliver a failed one once more."""

    TYPE: ClassVar[str] = DISPATCH_REQUESTED

    request_id: str
    run_id: str
    workflow_name: str
    step_kind: str
    step_index: int
    path: Path
    redelivery: int | None = None  # n: the n-th redelivery an operator asked for (0.2)

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "requestId": self.request_id,
            "runId": self.run_id,
            "workflowName": self.workflow_name,
            "stepKind": self.step_kind,
            "stepIndex": self.step_index,
            "path": self.path,
        }
        optional(payload, "redelivery", self.redelivery)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> DispatchRequested:
        return cls(
            request_id=p["requestId"],
            run_id=p["runId"],
            workflow_name=p["workflowName"],
            step_kind=p["stepKind"],
            step_index=int(p["stepIndex"]),
            path=list(p.get("path") or []),
            redelivery=p.get("redelivery"),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class DispatchAttemptFailed:
    """One delivery attempt failed and another follows at `retry_at` (since 0.2)."""

    TYPE: ClassVar[str] = DISPATCH_ATTEMPT_FAILED

    step_kind: str
    attempt: int
    error: str  # generic text (HTTP <status>, network error, mail delivery failed)
    status: int | None = None
    retry_at: datetime | None = None

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "stepKind": self.step_kind,
            "attempt": self.attempt,
            "error": self.error,
        }
        optional(payload, "status", self.status)
        optional(
            payload, "retryAt", None if self.retry_at is None else format_instant(self.retry_at)
        )
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> DispatchAttemptFailed:
        return cls(
            step_kind=p["stepKind"],
            attempt=int(p["attempt"]),
            error=str(p.get("error", "")),
            status=p.get("status"),
            retry_at=instant(p["retryAt"]) if p.get("retryAt") else None,
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class Dispatched:
    """The request was delivered."""

    TYPE: ClassVar[str] = DISPATCHED

    step_kind: str
    status: int
    attempt: int | None = None  # since 0.2

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"stepKind": self.step_kind, "status": self.status}
        optional(payload, "attempt", self.attempt)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> Dispatched:
        return cls(
            step_kind=p["stepKind"], status=int(p.get("status") or 0), attempt=p.get("attempt")
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class DispatchFailed:
    """The request failed for good; `error` is generic text, `reason` says how:
    refused (the SSRF guard), rejected (a permanent error), exhausted (attempts used up),
    ambiguous (a mail whose send may have happened before a crash), event_erased."""

    TYPE: ClassVar[str] = DISPATCH_FAILED

    step_kind: str
    error: str
    attempt: int | None = None
    reason: str | None = None
    status: int | None = None

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"stepKind": self.step_kind, "error": self.error}
        optional(payload, "attempt", self.attempt)
        optional(payload, "reason", self.reason)
        optional(payload, "status", self.status)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> DispatchFailed:
        return cls(
            step_kind=p["stepKind"],
            error=str(p.get("error", "")),
            attempt=p.get("attempt"),
            reason=p.get("reason"),
            status=p.get("status"),
        )
