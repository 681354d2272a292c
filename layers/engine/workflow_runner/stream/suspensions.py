"""The three ways a run suspends: a timer, an awaited event, a scheduled retry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, TypeAlias

from ..durations import format_instant
from .names import RETRY_SCHEDULED, STEP_WAITING, STEP_WAITING_FOR_EVENT, Path, instant


@dataclass(frozen=True, kw_only=True)
class SuspensionFact:
    """What every suspension records: where the run stopped and the results so far.

    `results` are the step results a later pass needs (awaited payloads excluded);
    `awaited_refs` maps the result keys that hold an awaited event's payload to its
    inbox id (None: the wait timed out), so erasing that event erases it here too.
    """

    workflow_name: str
    trigger_event_type: str
    step_index: int
    path: Path
    definition_fingerprint: str
    results: dict[str, Any] = field(default_factory=dict)
    awaited_refs: dict[str, str | None] = field(default_factory=dict)
    redacted: bool = False  # an erasure blanked its payload-derived fields

    @property
    def due_at(self) -> datetime:
        """When the suspension is due without any event (wake time or timeout)."""
        raise NotImplementedError

    @property
    def entry_path(self) -> Path:
        """Where a resume re-enters the step tree."""
        return list(self.path) if self.path else [{"i": self.step_index}]

    def _common(self) -> dict[str, Any]:
        payload = {
            "workflowName": self.workflow_name,
            "triggerEventType": self.trigger_event_type,
            "stepIndex": self.step_index,
            "path": self.path,
            "definitionFingerprint": self.definition_fingerprint,
            "results": self.results,
            "awaitedRefs": self.awaited_refs,
        }
        if self.redacted:
            payload["redacted"] = True
        return payload

    @staticmethod
    def _common_fields(p: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "workflow_name": p["workflowName"],
            "trigger_event_type": p.get("triggerEventType", ""),
            "step_index": int(p["stepIndex"]),
            "path": list(p.get("path") or []),
            "definition_fingerprint": p.get("definitionFingerprint", ""),
            "results": dict(p.get("results") or {}),
            "awaited_refs": dict(p.get("awaitedRefs") or {}),
            "redacted": bool(p.get("redacted", False)),
        }


@dataclass(frozen=True, kw_only=True)
class StepWaiting(SuspensionFact):
    """Suspended at a `wait` until `wake_at`."""

    TYPE: ClassVar[str] = STEP_WAITING

    wake_at: datetime

    @property
    def due_at(self) -> datetime:
        return self.wake_at

    def to_payload(self) -> dict[str, Any]:
        return {**self._common(), "wakeAt": format_instant(self.wake_at)}

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> StepWaiting:
        return cls(**cls._common_fields(p), wake_at=instant(p["wakeAt"]))


@dataclass(frozen=True, kw_only=True)
class StepWaitingForEvent(SuspensionFact):
    """Suspended at a `wait_for_event` until a matching event or `timeout_at`.

    Events stored at or after `lookback_from` may match; `consumed_event_ids` were
    taken by earlier waits of the run and never match again.
    """

    TYPE: ClassVar[str] = STEP_WAITING_FOR_EVENT

    event_type: str
    match: dict[str, Any] | None
    timeout_at: datetime
    lookback_from: datetime | None
    result_key: str
    consumed_event_ids: list[str] = field(default_factory=list)

    @property
    def due_at(self) -> datetime:
        return self.timeout_at

    def to_payload(self) -> dict[str, Any]:
        return {
            **self._common(),
            "eventType": self.event_type,
            "match": self.match,
            "timeoutAt": format_instant(self.timeout_at),
            "lookbackFrom": (
                None if self.lookback_from is None else format_instant(self.lookback_from)
            ),
            "resultKey": self.result_key,
            "consumedEventIds": self.consumed_event_ids,
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> StepWaitingForEvent:
        lookback = p.get("lookbackFrom")
        return cls(
            **cls._common_fields(p),
            event_type=p["eventType"],
            match=p.get("match"),
            timeout_at=instant(p["timeoutAt"]),
            lookback_from=instant(lookback) if lookback else None,
            result_key=p.get("resultKey") or p["eventType"],
            consumed_event_ids=list(p.get("consumedEventIds") or []),
        )


@dataclass(frozen=True, kw_only=True)
class RetryScheduled(SuspensionFact):
    """A retry's attempt failed; the next attempt (`path` names it) runs at `wake_at`."""

    TYPE: ClassVar[str] = RETRY_SCHEDULED

    wake_at: datetime
    attempt: int
    max_attempts: int
    error: str

    @property
    def due_at(self) -> datetime:
        return self.wake_at

    def to_payload(self) -> dict[str, Any]:
        return {
            **self._common(),
            "wakeAt": format_instant(self.wake_at),
            "attempt": self.attempt,
            "maxAttempts": self.max_attempts,
            "error": self.error,
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> RetryScheduled:
        return cls(
            **cls._common_fields(p),
            wake_at=instant(p["wakeAt"]),
            attempt=int(p["attempt"]),
            max_attempts=int(p["maxAttempts"]),
            error=str(p.get("error", "")),
        )


Suspension: TypeAlias = StepWaiting | StepWaitingForEvent | RetryScheduled
