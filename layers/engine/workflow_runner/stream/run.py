"""Facts of a run stream other than suspensions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..fast_init import fast_init
from .names import (
    RETURNED_FAILURE,
    RUN_CANCELLED,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_REDRIVEN,
    RUN_STARTED,
    STEP_EVENT_MATCHED,
    STEP_RESUMED,
    Path,
    ResumedBy,
    optional,
    put_results,
    take_results,
)


@fast_init
@dataclass(frozen=True, kw_only=True)
class RunStarted:
    """A run began; it references its trigger event (inbox id), never copies it."""

    TYPE: ClassVar[str] = RUN_STARTED

    workflow_name: str
    workflow_version: int | None
    trigger_event_type: str
    trigger_event_id: str | None  # None: a cron run (its trigger is rebuilt from the instant)
    definition_fingerprint: str
    idempotency_key: str | None = None
    cron_scheduled_at: str | None = None
    # The key its callback tokens are derived with (callback_tokens.py); only runs of a
    # workflow with a wait_for_callback have one, and none started before 0.3.
    callback_secret: str | None = None
    parent_run_id: str | None = None  # started by call_workflow, start_workflow or map

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "workflowName": self.workflow_name,
            "workflowVersion": self.workflow_version,
            "triggerEventType": self.trigger_event_type,
            "triggerEventRef": (
                None if self.trigger_event_id is None else {"eventId": self.trigger_event_id}
            ),
            "definitionFingerprint": self.definition_fingerprint,
        }
        optional(payload, "idempotencyKey", self.idempotency_key)
        optional(payload, "cronScheduledAt", self.cron_scheduled_at)
        optional(payload, "callbackSecret", self.callback_secret)
        optional(payload, "parentRunId", self.parent_run_id)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> RunStarted:
        ref = p.get("triggerEventRef")
        return cls(
            workflow_name=p["workflowName"],
            workflow_version=p.get("workflowVersion"),
            trigger_event_type=p["triggerEventType"],
            trigger_event_id=ref.get("eventId") if isinstance(ref, Mapping) else None,
            definition_fingerprint=p["definitionFingerprint"],
            idempotency_key=p.get("idempotencyKey"),
            cron_scheduled_at=p.get("cronScheduledAt"),
            callback_secret=p.get("callbackSecret"),
            parent_run_id=p.get("parentRunId"),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class StepEventMatched:
    """The first event that matched the open wait (OCC on the suspension's version)."""

    TYPE: ClassVar[str] = STEP_EVENT_MATCHED

    step_index: int
    event_id: str
    event_type: str
    suspension_version: int

    def to_payload(self) -> dict[str, Any]:
        return {
            "stepIndex": self.step_index,
            "eventId": self.event_id,
            "eventType": self.event_type,
            "suspensionVersion": self.suspension_version,
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> StepEventMatched:
        return cls(
            step_index=int(p["stepIndex"]),
            event_id=p["eventId"],
            event_type=p["eventType"],
            suspension_version=int(p["suspensionVersion"]),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class StepResumed:
    """A pass claimed the open suspension (the claim that makes one writer win)."""

    TYPE: ClassVar[str] = STEP_RESUMED

    step_index: int
    path: Path | None
    retry_attempt: int | None
    suspension_version: int
    awaited_event_id: str | None
    resumed_by: ResumedBy
    task_id: str | None = None  # the task whose recorded outcome the pass takes
    # The definition the pass runs on when it is not the run's own: its own is gone from
    # the code and this one's shape agrees (definition/shape.py).
    definition_fingerprint: str | None = None

    def to_payload(self) -> dict[str, Any]:
        payload = {
            "stepIndex": self.step_index,
            "path": self.path,
            "retryAttempt": self.retry_attempt,
            "suspensionVersion": self.suspension_version,
            "awaitedEventId": self.awaited_event_id,
            "resumedBy": self.resumed_by,
        }
        optional(payload, "taskId", self.task_id)
        optional(payload, "definitionFingerprint", self.definition_fingerprint)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> StepResumed:
        return cls(
            step_index=int(p["stepIndex"]),
            path=p.get("path"),
            retry_attempt=p.get("retryAttempt"),
            suspension_version=int(p.get("suspensionVersion") or 0),
            awaited_event_id=p.get("awaitedEventId"),
            resumed_by=p.get("resumedBy", "timer"),
            task_id=p.get("taskId"),
            definition_fingerprint=p.get("definitionFingerprint"),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class RunCompleted:
    """The run ended: it returned `result` or ran off the end of its steps."""

    TYPE: ClassVar[str] = RUN_COMPLETED

    workflow_name: str
    trigger_event_type: str
    step_index: int
    result: Any = None
    results_delta: dict[str, Any] | None = None  # since 0.2: what the last pass wrote
    awaited_refs_delta: dict[str, str | None] | None = None
    redacted: bool = False

    def to_payload(self) -> dict[str, Any]:
        payload = {
            "workflowName": self.workflow_name,
            "triggerEventType": self.trigger_event_type,
            "stepIndex": self.step_index,
            "result": self.result,
        }
        put_results(payload, None, None, self.results_delta, self.awaited_refs_delta)
        if self.redacted:
            payload["redacted"] = True
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> RunCompleted:
        changes = take_results(p)
        return cls(
            workflow_name=p["workflowName"],
            trigger_event_type=p.get("triggerEventType", ""),
            step_index=int(p["stepIndex"]),
            result=p.get("result"),
            results_delta=changes["results_delta"],
            awaited_refs_delta=changes["awaited_refs_delta"],
            redacted=bool(p.get("redacted", False)),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class RunFailed:
    """The run ended as failed.

    `error` is generic text (`workflow step failed (<ErrorClass>)`, invariant 8);
    `reason` says why when it was not a step raising (e.g. returned_failure,
    workflow_definition_changed); `result` is the returned value of a returned failure.
    """

    TYPE: ClassVar[str] = RUN_FAILED

    workflow_name: str
    step_index: int
    error: str
    trigger_event_type: str | None = None
    path: Path | None = None
    reason: str | None = None
    result: Any = None
    results_delta: dict[str, Any] | None = None  # since 0.2: what the failed pass wrote
    awaited_refs_delta: dict[str, str | None] | None = None
    redacted: bool = False

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"workflowName": self.workflow_name}
        optional(payload, "triggerEventType", self.trigger_event_type)
        payload["stepIndex"] = self.step_index
        payload["error"] = self.error
        if self.path:
            payload["path"] = self.path
        optional(payload, "reason", self.reason)
        if self.reason == RETURNED_FAILURE:
            payload["result"] = self.result
        put_results(payload, None, None, self.results_delta, self.awaited_refs_delta)
        if self.redacted:
            payload["redacted"] = True
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> RunFailed:
        changes = take_results(p)
        return cls(
            workflow_name=p["workflowName"],
            step_index=int(p.get("stepIndex") or 0),
            error=str(p.get("error", "")),
            trigger_event_type=p.get("triggerEventType"),
            path=p.get("path"),
            reason=p.get("reason"),
            result=p.get("result"),
            results_delta=changes["results_delta"],
            awaited_refs_delta=changes["awaited_refs_delta"],
            redacted=bool(p.get("redacted", False)),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class RunCancelled:
    """An operator cancelled the run; it never resumes."""

    TYPE: ClassVar[str] = RUN_CANCELLED

    workflow_name: str
    step_index: int | None
    reason: str | None = None

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"workflowName": self.workflow_name, "stepIndex": self.step_index}
        optional(payload, "reason", self.reason)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> RunCancelled:
        return cls(
            workflow_name=p["workflowName"], step_index=p.get("stepIndex"), reason=p.get("reason")
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class RunRedriven:
    """A failed run is re-entered where its failed pass entered, on `definition_fingerprint`.

    `dispatch_seed` is the failed pass's seed, so dispatches it requested keep their ids.
    """

    TYPE: ClassVar[str] = RUN_REDRIVEN

    from_step_index: int
    path: Path
    definition_fingerprint: str
    previous_fingerprint: str
    definition_version: int
    suspension_version: int | None
    awaited_event_id: str | None
    dispatch_seed: str

    def to_payload(self) -> dict[str, Any]:
        return {
            "fromStepIndex": self.from_step_index,
            "path": self.path,
            "definitionFingerprint": self.definition_fingerprint,
            "previousFingerprint": self.previous_fingerprint,
            "definitionVersion": self.definition_version,
            "suspensionVersion": self.suspension_version,
            "awaitedEventId": self.awaited_event_id,
            "dispatchSeed": self.dispatch_seed,
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> RunRedriven:
        return cls(
            from_step_index=int(p["fromStepIndex"]),
            path=list(p.get("path") or []),
            definition_fingerprint=p["definitionFingerprint"],
            previous_fingerprint=p.get("previousFingerprint", ""),
            definition_version=int(p.get("definitionVersion") or 0),
            suspension_version=p.get("suspensionVersion"),
            awaited_event_id=p.get("awaitedEventId"),
            dispatch_seed=p["dispatchSeed"],
        )
