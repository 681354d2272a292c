"""The fact of a run held before its first pass by flow control.

A trigger that a throttle, a debounce or a concurrency limit does not let start at once
still starts its run (the run id is claimed, so a repeated trigger is still a no-op),
but the run suspends at once, before its first step, with `workflow.flow.held`. Its
pending row is due at `wake_at` (a throttle's turn, a debounce's quiet period end, or
now for a concurrency limit, which queues it as a resume); the resume that claims it
runs the first pass. A debounce appends a newer held fact for each later trigger of
its key, naming the event the run then starts with (`event_id`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from ..durations import format_instant
from ..fast_init import fast_init
from .names import instant, optional
from .suspensions import SuspensionFact

FLOW_HELD = "workflow.flow.held"


@fast_init
@dataclass(frozen=True, kw_only=True)
class FlowHeld(SuspensionFact):
    """Held before the first step until `wake_at` by the limit `limit` (its label);
    `reason` is its kind (throttle, debounce, concurrency)."""

    TYPE: ClassVar[str] = FLOW_HELD

    wake_at: datetime
    reason: str
    limit: str
    event_id: str | None = None  # the trigger event the run starts with (debounce)
    first_at: datetime | None = None  # a debounce's first trigger (its timeout counts from it)

    @property
    def due_at(self) -> datetime:
        return self.wake_at

    def to_payload(self) -> dict[str, Any]:
        payload = {
            **self._common(),
            "wakeAt": format_instant(self.wake_at),
            "reason": self.reason,
            "limit": self.limit,
        }
        optional(payload, "eventId", self.event_id)
        if self.first_at is not None:
            payload["firstAt"] = format_instant(self.first_at)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> FlowHeld:
        first = p.get("firstAt")
        return cls(
            **cls._common_fields(p),
            wake_at=instant(p["wakeAt"]),
            reason=str(p.get("reason") or ""),
            limit=str(p.get("limit") or ""),
            event_id=p.get("eventId"),
            first_at=instant(first) if first else None,
        )
