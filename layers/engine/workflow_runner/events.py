"""Event type names on run and dispatch streams, and the fold of a run stream."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .durations import parse_instant

RUN_STREAM = "workflow-run"
DISPATCH_STREAM = "step-dispatch"

RUN_STARTED = "workflow.run-started"
STEP_WAITING = "workflow.step.waiting"
STEP_WAITING_FOR_EVENT = "workflow.step.waiting-for-event"
STEP_EVENT_MATCHED = "workflow.step.event-matched"
STEP_RESUMED = "workflow.step.resumed"
RETRY_SCHEDULED = "workflow.retry.scheduled"
RUN_COMPLETED = "workflow.run-completed"
RUN_FAILED = "workflow.run-failed"
RUN_CANCELLED = "workflow.run-cancelled"
RUN_REDRIVEN = "workflow.run-redriven"

DISPATCH_REQUESTED = "step.dispatch-requested"
DISPATCHED = "step.dispatched"
DISPATCH_FAILED = "step.dispatch-failed"

SUSPENSION_TYPES = frozenset({STEP_WAITING, STEP_WAITING_FOR_EVENT, RETRY_SCHEDULED})
TERMINAL_TYPES = frozenset({RUN_COMPLETED, RUN_FAILED, RUN_CANCELLED})
SUSPENSION_KIND_TO_TYPE = {
    "waiting": STEP_WAITING,
    "waiting-for-event": STEP_WAITING_FOR_EVENT,
    "retry-scheduled": RETRY_SCHEDULED,
}


@dataclass
class RunState:
    """What a run stream says about its run, folded from its events."""

    run_id: str
    tenant_id: str
    version: int = 0
    workflow_name: str = ""
    fingerprint: str = ""
    trigger_event_type: str = ""
    trigger_event_id: str | None = None
    started_at: datetime | None = None
    status: str = "missing"  # missing | running | waiting | completed | failed | cancelled
    suspension: dict[str, Any] | None = None  # payload of the open suspension
    suspension_type: str | None = None
    suspension_version: int = 0
    matched_event_id: str | None = None
    consumed_event_ids: list[str] = field(default_factory=list)
    last_failure: dict[str, Any] | None = None
    started_payload: dict[str, Any] = field(default_factory=dict)
    # The trigger event's inbox row when the loader fetched it with the stream.
    trigger_inbox: dict[str, Any] | None = None
    trigger_loaded: bool = False

    @property
    def settled(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")

    @property
    def wake_at(self) -> datetime | None:
        if self.suspension is None:
            return None
        raw = self.suspension.get("wakeAt") or self.suspension.get("timeoutAt")
        return parse_instant(raw) if isinstance(raw, str) else None


def fold_run(run_id: str, tenant_id: str, events: list[Any]) -> RunState:
    """Fold stored run-stream events (oldest first) into a RunState."""
    state = RunState(run_id=run_id, tenant_id=tenant_id)
    for event in events:
        state.version = event.version
        payload = event.payload
        if event.type == RUN_STARTED:
            state.workflow_name = payload["workflowName"]
            state.fingerprint = payload["definitionFingerprint"]
            state.trigger_event_type = payload["triggerEventType"]
            ref = payload.get("triggerEventRef")
            state.trigger_event_id = ref.get("eventId") if isinstance(ref, dict) else None
            state.started_at = event.recorded_at
            state.started_payload = payload
            state.status = "running"
        elif event.type in SUSPENSION_TYPES:
            state.status = "waiting"
            state.suspension = payload
            state.suspension_type = event.type
            state.suspension_version = event.version
            state.matched_event_id = None
            state.fingerprint = payload.get("definitionFingerprint", state.fingerprint)
        elif event.type == STEP_EVENT_MATCHED:
            if state.matched_event_id is None:
                state.matched_event_id = payload["eventId"]
        elif event.type == STEP_RESUMED:
            state.status = "running"
            if state.matched_event_id:
                state.consumed_event_ids.append(state.matched_event_id)
            state.suspension = None
            state.suspension_type = None
            state.matched_event_id = None
        elif event.type == RUN_COMPLETED:
            state.status = "completed"
            state.suspension = None
        elif event.type == RUN_FAILED:
            state.status = "failed"
            state.suspension = None
            state.last_failure = payload
        elif event.type == RUN_CANCELLED:
            state.status = "cancelled"
            state.suspension = None
        elif event.type == RUN_REDRIVEN:
            state.status = "running"
            state.fingerprint = payload.get("definitionFingerprint", state.fingerprint)
    return state
