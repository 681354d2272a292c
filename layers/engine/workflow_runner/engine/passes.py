"""A pass over a run: load it, re-enter its step tree, persist where the pass left it.

Shared by every stage that moves a run forward — the start (ingest), the resume, the
redrive — so that a pass is written one way only: its dispatch requests, the one event
that says where the run stands, and the run summary, in the caller's transaction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from ..definition import DomainEvent, WorkflowDefinition
from ..durations import parse_instant
from ..errors import RunNotFound
from ..interpreter import Interpreter, PassResult, Suspension, WorkflowStepError, step_at
from ..store import InboxEvent, Store, StoredEvent
from ..stream import (
    DISPATCH_STREAM,
    RETURNED_FAILURE,
    RUN_STREAM,
    DispatchRequested,
    RetryScheduled,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunState,
    RunStatus,
    StepWaiting,
    StepWaitingForEvent,
    SuspensionFact,
    fold_run,
)

log = logging.getLogger("workflow_runner")


@dataclass(frozen=True)
class RunOutcome:
    """Where a pass left a run."""

    tenant_id: str
    run_id: str
    workflow_name: str
    outcome: Literal["suspended", "completed", "failed"]
    step_index: int | None = None
    wake_at: datetime | None = None
    reason: str | None = None


@dataclass
class LoadedRun:
    """A run's stream, folded, with its trigger event's inbox row (read together)."""

    state: RunState
    events: list[StoredEvent]
    trigger_row: InboxEvent | None


# --- reading a run ----------------------------------------------------------------------


def load_run_for_pass(store: Store, tenant_id: str, run_id: str) -> LoadedRun:
    """A run's stream and trigger row in one round trip.

    Raises:
        RunNotFound: the tenant has no run with this id.
    """
    events, trigger = store.streams.load_run(tenant_id, run_id)
    if not events or not isinstance(events[0].fact, RunStarted):
        raise RunNotFound(tenant_id, run_id)
    state = fold_run(run_id, tenant_id, [e.recorded for e in events])
    return LoadedRun(state, events, trigger)


def load_run(store: Store, tenant_id: str, run_id: str) -> RunState:
    """Fold a run's stream.

    Raises:
        RunNotFound: the tenant has no run with this id.
    """
    return load_run_for_pass(store, tenant_id, run_id).state


def domain_event_of(row: InboxEvent) -> DomainEvent:
    """A stored inbox event as a workflow sees it (`ctx.event`)."""
    return DomainEvent(
        id=row.event_id,
        type=row.type,
        payload=row.detail,
        tenant_id=row.tenant_id,
        time=row.event_time or row.received_at,
        source=row.source,
    )


def cron_event(tenant_id: str, workflow_name: str, scheduled_at: str) -> DomainEvent:
    """The trigger of a cron run, rebuilt from its scheduled instant (nothing stored)."""
    return DomainEvent(
        id=f"cron:{workflow_name}:{scheduled_at}",
        type="cron",
        payload={"scheduledAt": scheduled_at},
        tenant_id=tenant_id,
        time=parse_instant(scheduled_at),
        source="workflow-runner.cron",
    )


def trigger_event(store: Store, run: LoadedRun) -> DomainEvent | None:
    """The run's trigger event (None when it is no longer stored, e.g. erased)."""
    state = run.state
    started = state.started
    if started is not None and started.cron_scheduled_at:
        return cron_event(state.tenant_id, state.workflow_name, started.cron_scheduled_at)
    if state.trigger_event_id is None:
        return None
    row = run.trigger_row
    if row is None or row.detail is None:
        return None
    return domain_event_of(row)


def restore_results(
    store: Store, tenant_id: str, suspension: SuspensionFact, matched: str | None
) -> tuple[dict[str, Any], dict[str, str | None]] | None:
    """The results a suspension carried plus the awaited payloads it references by id
    (the matched event under a wait_for_event's result key); None when one of them is
    no longer stored."""
    refs = dict(suspension.awaited_refs)
    if isinstance(suspension, StepWaitingForEvent):
        refs[suspension.result_key] = matched
    restored = dict(suspension.results)
    for key, event_id in refs.items():
        if event_id is None:
            restored[key] = None
            continue
        row = store.inbox.get(tenant_id, event_id)
        if row is None or row.detail is None:
            return None
        restored[key] = row.detail
    return restored, refs


# --- writing a pass -----------------------------------------------------------------------


def _suspension_fact(
    definition: WorkflowDefinition, trigger_event_type: str, result: PassResult
) -> StepWaiting | StepWaitingForEvent | RetryScheduled:
    suspension = result.suspension
    assert suspension is not None
    common: dict[str, Any] = {
        "workflow_name": definition.name,
        "trigger_event_type": trigger_event_type,
        "step_index": suspension.step_index,
        "path": suspension.path,
        "definition_fingerprint": definition.fingerprint,
        "results": result.persisted_results(),
        "awaited_refs": result.awaited_refs,
    }
    return suspension_fact(suspension, common)


def suspension_fact(
    suspension: Suspension, common: dict[str, Any]
) -> StepWaiting | StepWaitingForEvent | RetryScheduled:
    """The stream fact of an interpreter suspension (`common`: the shared fields)."""
    if suspension.kind == "waiting-for-event":
        wait = suspension.event
        assert wait is not None
        return StepWaitingForEvent(
            **common,
            event_type=wait.event_type,
            match=wait.match,
            timeout_at=suspension.wake_at,
            lookback_from=wait.lookback_from,
            result_key=wait.result_key,
            consumed_event_ids=wait.consumed_event_ids,
        )
    if suspension.kind == "retry-scheduled":
        retry = suspension.retry
        assert retry is not None
        return RetryScheduled(
            **common,
            wake_at=suspension.wake_at,
            attempt=retry.attempt,
            max_attempts=retry.max_attempts,
            error=retry.error,
        )
    return StepWaiting(**common, wake_at=suspension.wake_at)


def persist_pass(
    store: Store,
    tenant_id: str,
    run_id: str,
    definition: WorkflowDefinition,
    trigger_event_type: str,
    version: int,
    result: PassResult,
    now: datetime,
) -> RunOutcome:
    """Append a pass's outcome after stream version `version` (held by this pass)."""
    fact: StepWaiting | StepWaitingForEvent | RetryScheduled | RunCompleted | RunFailed
    status: RunStatus
    if result.outcome == "suspended":
        fact = _suspension_fact(definition, trigger_event_type, result)
        status = "waiting"
        outcome = RunOutcome(
            tenant_id,
            run_id,
            definition.name,
            "suspended",
            step_index=fact.step_index,
            wake_at=fact.due_at,
        )
    elif result.outcome == "completed":
        fact = RunCompleted(
            workflow_name=definition.name,
            trigger_event_type=trigger_event_type,
            step_index=len(definition.steps),
            result=result.return_value,
        )
        status = "completed"
        outcome = RunOutcome(tenant_id, run_id, definition.name, "completed")
    else:
        failed_index = (
            int(result.failed_path[0]["i"]) if result.failed_path else len(definition.steps)
        )
        fact = RunFailed(
            workflow_name=definition.name,
            trigger_event_type=trigger_event_type,
            step_index=failed_index,
            error=result.error or "",
            path=result.failed_path or None,
            reason=result.reason,
            result=result.return_value if result.reason == RETURNED_FAILURE else None,
        )
        if result.error_detail:
            # The raw text may carry personal data: log only, never store (invariant 8).
            log.warning(
                "workflow step failed",
                extra={"tenant_id": tenant_id, "run_id": run_id, "detail": result.error_detail},
            )
        status = "failed"
        outcome = RunOutcome(
            tenant_id, run_id, definition.name, "failed", failed_index, reason=result.reason
        )
    # Every write of the pass goes out in one round trip: the claim (or the start)
    # already holds `version`, so none of these appends can lose a race.
    with store.pipeline():
        for dispatch in result.dispatches:
            requested = DispatchRequested(
                request_id=dispatch.request_id,
                run_id=run_id,
                workflow_name=definition.name,
                step_kind=dispatch.step_kind,
                step_index=dispatch.step_index,
                path=dispatch.path,
            )
            store.streams.append(
                tenant_id, dispatch.request_id, DISPATCH_STREAM, 0, [requested], now, check=False
            )
            store.outbox.insert(
                tenant_id, dispatch.request_id, run_id, dispatch.step_kind, dispatch.request, now
            )
        store.streams.append(tenant_id, run_id, RUN_STREAM, version, [fact], now, check=False)
        store.runs.upsert(
            tenant_id,
            run_id,
            definition.name,
            status,
            version + 1,
            definition.fingerprint,
            trigger_event_type,
            now,
            workflow_version=definition.version,
        )
    return outcome


def fail_run(
    store: Store,
    state: RunState,
    version: int,
    step_index: int,
    reason: str,
    error: str,
    now: datetime,
) -> bool:
    """End a run as failed without a pass (its definition or an input is gone).

    False when the stream moved past `version` (another writer won).
    """
    failed = RunFailed(
        workflow_name=state.workflow_name, step_index=step_index, error=error, reason=reason
    )
    if not store.streams.append(state.tenant_id, state.run_id, RUN_STREAM, version, [failed], now):
        return False
    store.runs.upsert(
        state.tenant_id,
        state.run_id,
        state.workflow_name,
        "failed",
        version + 1,
        state.fingerprint,
        state.trigger_event_type,
        now,
    )
    return True


def continue_run(
    store: Store,
    run: LoadedRun,
    definition: WorkflowDefinition,
    suspension: SuspensionFact,
    matched: str | None,
    version: int,
    now: datetime,
    dispatch_seed: str | None = None,
) -> RunOutcome:
    """Re-enter the step tree at a claimed suspension and persist the pass.

    `version` is the stream version this pass holds (its claim). `dispatch_seed`
    (default: derived from `version`) lets a redrive repeat a failed pass with that
    pass's seed, so dispatches it already requested keep their ids.
    """
    state = run.state
    tenant_id, run_id = state.tenant_id, state.run_id
    step_index = suspension.step_index

    def fail(reason: str, error: str) -> RunOutcome:
        fail_run(store, state, version, step_index, reason, error, now)
        return RunOutcome(
            tenant_id, run_id, state.workflow_name, "failed", step_index, reason=reason
        )

    trigger = trigger_event(store, run)
    if trigger is None:
        return fail(
            "trigger_event_unavailable", f"the trigger event of run {run_id} is no longer stored"
        )
    restored = restore_results(store, tenant_id, suspension, matched)
    if restored is None:
        return fail(
            "awaited_event_unavailable", f"an awaited event of run {run_id} is no longer stored"
        )
    results, refs = restored
    consumed = list(state.consumed_event_ids)
    if matched is not None:
        consumed.append(matched)
    path = suspension.entry_path
    try:
        step_at(definition.steps, path)
    except WorkflowStepError:
        return fail(
            "workflow_definition_changed",
            f"run {run_id} is suspended at a step its definition does not have",
        )
    assert state.started_at is not None
    result = Interpreter(
        definition,
        trigger,
        run_id,
        now,
        results=results,
        awaited_refs=refs,
        dispatch_seed=dispatch_seed or f"{tenant_id}|{version + 1}",
        run_started_at=state.started_at,
        consumed_event_ids=consumed,
    ).run(path)
    return persist_pass(
        store, tenant_id, run_id, definition, state.trigger_event_type, version, result, now
    )
