"""Facts of a dispatch request's stream: requested (version 1), then one outcome."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from .names import DISPATCH_FAILED, DISPATCH_REQUESTED, DISPATCHED, Path, optional


@dataclass(frozen=True, kw_only=True)
class DispatchRequested:
    """A pass asked for a mail or webhook (version 1 of the request's stream)."""

    TYPE: ClassVar[str] = DISPATCH_REQUESTED

    request_id: str
    run_id: str
    workflow_name: str
    step_kind: str
    step_index: int
    path: Path

    def to_payload(self) -> dict[str, Any]:
        return {
            "requestId": self.request_id,
            "runId": self.run_id,
            "workflowName": self.workflow_name,
            "stepKind": self.step_kind,
            "stepIndex": self.step_index,
            "path": self.path,
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> DispatchRequested:
        return cls(
            request_id=p["requestId"],
            run_id=p["runId"],
            workflow_name=p["workflowName"],
            step_kind=p["stepKind"],
            step_index=int(p["stepIndex"]),
            path=list(p.get("path") or []),
        )


@dataclass(frozen=True, kw_only=True)
class Dispatched:
    """The request was delivered (version 2: its one outcome)."""

    TYPE: ClassVar[str] = DISPATCHED

    step_kind: str
    status: int

    def to_payload(self) -> dict[str, Any]:
        return {"stepKind": self.step_kind, "status": self.status}

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> Dispatched:
        return cls(step_kind=p["stepKind"], status=int(p.get("status") or 0))


@dataclass(frozen=True, kw_only=True)
class DispatchFailed:
    """The request failed for good (version 2); `error` is generic text."""

    TYPE: ClassVar[str] = DISPATCH_FAILED

    step_kind: str
    error: str
    attempt: int | None = None
    reason: str | None = None

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"stepKind": self.step_kind, "error": self.error}
        optional(payload, "attempt", self.attempt)
        optional(payload, "reason", self.reason)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> DispatchFailed:
        return cls(
            step_kind=p["stepKind"],
            error=str(p.get("error", "")),
            attempt=p.get("attempt"),
            reason=p.get("reason"),
        )
