"""A limit as it applies to one piece of work: its row's name and its numbers. Stored
with a task (task_queue.flow), so that its attempts count against the limits its pass
resolved."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

LimitKind = Literal["concurrency", "throttle", "rate_limit", "singleton", "debounce", "batch"]


@dataclass(frozen=True)
class LimitSpec:
    """One limit as it applies to one piece of work: its row and its numbers."""

    flow_key: str
    kind: LimitKind
    limit: int
    tenant_id: str | None  # None: shared by every tenant
    workflow_name: str
    step_key: str | None = None
    key_value: str = ""
    period_ms: int = 0  # throttle: the period of `limit` tokens
    burst: int = 1
    priority: int = 0  # seconds of head start in the key's queue (priority=)

    @property
    def interval(self) -> timedelta:
        """A throttle's time per token."""
        return timedelta(milliseconds=self.period_ms) / self.limit

    @property
    def label(self) -> str:
        """How operators read it: `concurrency 5 per accountId=a-1 (tenant)`."""
        owner = f"{self.workflow_name}/{self.step_key}" if self.step_key else self.workflow_name
        what = f"{self.kind} {self.limit}"
        if self.kind == "throttle":
            what += f" per {timedelta(milliseconds=self.period_ms)}"
        shared = "every tenant" if self.tenant_id is None else "per tenant"
        key = f" key {self.key_value!r}" if self.key_value else ""
        return f"{what} of {owner}{key} ({shared})"

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "k": self.flow_key,
            "kind": self.kind,
            "limit": self.limit,
            "tenant": self.tenant_id,
            "workflow": self.workflow_name,
            "step": self.step_key,
            "key": self.key_value,
            "periodMs": self.period_ms,
            "burst": self.burst,
        }
        if self.priority:
            found["priority"] = self.priority
        return found

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LimitSpec:
        return cls(
            flow_key=str(data["k"]),
            kind="throttle" if data.get("kind") == "throttle" else "concurrency",
            limit=int(data["limit"]),
            tenant_id=data.get("tenant"),
            workflow_name=str(data.get("workflow") or ""),
            step_key=data.get("step"),
            key_value=str(data.get("key") or ""),
            period_ms=int(data.get("periodMs") or 0),
            burst=int(data.get("burst") or 1),
            priority=int(data.get("priority") or 0),
        )
