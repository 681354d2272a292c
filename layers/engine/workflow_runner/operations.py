"""The engine's operations: each one database transaction, called by the Lambda
handlers, the local runtime and the CLI alike."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from . import events as ev
from .dsl import DomainEvent, EventTrigger, WorkflowDefinition, run_id_for
from .durations import format_instant, parse_instant
from .errors import RunNotFound, TransientStoreError
from .interpreter import Interpreter, PassResult, WorkflowStepError, describe_step_error, step_at
from .match import equality_key, matches_safely, payload_keys
from .registry import WorkflowRegistry, default_registry
from .store import NewEvent, Store

log = logging.getLogger("workflow_runner")

PENDING_PROJECTION = "workflow_run_pending"

ResumeOutcome = Literal["already-resumed", "not-due", "suspended", "completed", "failed"]


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


@dataclass(frozen=True)
class IngestResult:
    """What ingesting one domain event did."""

    event_id: str
    stored: bool  # False: a redelivery of an event already processed
    started: list[RunOutcome] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # workflows whose filter said no / run existed


@dataclass(frozen=True)
class WokenRun:
    """A waiting run an awaited event (or a late projection check) made due."""

    tenant_id: str
    run_id: str
    step_index: int
    event_id: str
    wake_at: datetime


@dataclass(frozen=True)
class DueRun:
    tenant_id: str
    run_id: str
    step_index: int
    wake_at: datetime


@dataclass(frozen=True)
class ProjectionResult:
    """What a catch-up applied; `woken`: waits an already-stored event satisfied;
    `due_soon`: new suspensions due within the horizon asked for (to enqueue now,
    delayed, instead of waiting for the next due-scan tick)."""

    applied: int
    woken: list[WokenRun] = field(default_factory=list)
    due_soon: list[DueRun] = field(default_factory=list)


@dataclass(frozen=True)
class ResumeResult:
    """The outcome of resume_run; never an exception for an expected outcome."""

    outcome: ResumeOutcome
    tenant_id: str
    run_id: str
    step_index: int
    wake_at: datetime | None = None
    suspended_at: int | None = None
    reason: str | None = None
    resumed_wake_at: datetime | None = None


@dataclass(frozen=True)
class _ResumeKey:
    tenant_id: str
    run_id: str
    step_index: int

    def result(self, outcome: ResumeOutcome, **kw: Any) -> ResumeResult:
        return ResumeResult(outcome, self.tenant_id, self.run_id, self.step_index, **kw)


@dataclass(frozen=True)
class CancelResult:
    outcome: Literal["cancelled", "already-cancelled", "already-settled"]
    tenant_id: str
    run_id: str
    status: str


# --- helpers --------------------------------------------------------------------


def _inbox_event(row: dict[str, Any]) -> DomainEvent:
    return DomainEvent(
        id=row["event_id"],
        type=row["type"],
        payload=row["detail"],
        tenant_id=row["tenant_id"],
        time=row["event_time"] or row["received_at"],
        source=row["source"],
    )


def _cron_event(tenant_id: str, workflow_name: str, scheduled_at: str) -> DomainEvent:
    return DomainEvent(
        id=f"cron:{workflow_name}:{scheduled_at}",
        type="cron",
        payload={"scheduledAt": scheduled_at},
        tenant_id=tenant_id,
        time=parse_instant(scheduled_at),
        source="workflow-runner.cron",
    )


def _store_inbox(store: Store, event: DomainEvent, now: datetime) -> None:
    """Store a domain event (a redelivery changes nothing) and remember its tenant."""
    store.insert_inbox(
        event.tenant_id,
        event.id,
        event.source,
        event.type,
        event.payload,
        event.time,
        now,
        read=False,
    )
    store.register_tenant(event.tenant_id, now)


def _run_event(type: str, payload: dict[str, Any]) -> NewEvent:
    return NewEvent(type=type, payload=payload)


def _persist_pass(
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
    common = {"workflowName": definition.name, "triggerEventType": trigger_event_type}
    outcome = RunOutcome(tenant_id, run_id, definition.name, result.outcome)
    if result.outcome == "suspended":
        suspension = result.suspension
        assert suspension is not None
        payload: dict[str, Any] = {
            **common,
            "stepIndex": suspension.step_index,
            "path": suspension.path,
            "definitionFingerprint": definition.fingerprint,
            "results": result.persisted_results(),
            "awaitedRefs": result.awaited_refs,
            **suspension.detail,
        }
        if suspension.kind != "waiting-for-event":
            payload["wakeAt"] = format_instant(suspension.wake_at)
        event = _run_event(ev.SUSPENSION_KIND_TO_TYPE[suspension.kind], payload)
        status = "waiting"
        outcome = RunOutcome(
            tenant_id,
            run_id,
            definition.name,
            "suspended",
            step_index=suspension.step_index,
            wake_at=suspension.wake_at,
        )
    elif result.outcome == "completed":
        event = _run_event(
            ev.RUN_COMPLETED,
            {**common, "stepIndex": len(definition.steps), "result": result.return_value},
        )
        status = "completed"
    else:
        failed_index = (
            int(result.failed_path[0]["i"]) if result.failed_path else len(definition.steps)
        )
        payload = {**common, "stepIndex": failed_index, "error": result.error}
        if result.failed_path:
            payload["path"] = result.failed_path
        if result.reason:
            payload["reason"] = result.reason
        if result.reason == "returned_failure":
            payload["result"] = result.return_value
        if result.error_detail:
            # The raw text may carry personal data: log only, never store (invariant 8).
            log.warning(
                "workflow step failed",
                extra={"tenant_id": tenant_id, "run_id": run_id, "detail": result.error_detail},
            )
        event = _run_event(ev.RUN_FAILED, payload)
        status = "failed"
        outcome = RunOutcome(
            tenant_id,
            run_id,
            definition.name,
            "failed",
            step_index=failed_index,
            reason=result.reason,
        )
    # Every write of the pass goes out in one round trip: the claim (or the start)
    # already holds `version`, so none of these appends can lose a race.
    with store.pipeline():
        for dispatch in result.dispatches:
            store.append(
                tenant_id,
                dispatch.request_id,
                ev.DISPATCH_STREAM,
                0,
                [
                    _run_event(
                        ev.DISPATCH_REQUESTED,
                        {
                            "requestId": dispatch.request_id,
                            "runId": run_id,
                            "workflowName": definition.name,
                            "stepKind": dispatch.step_kind,
                            "stepIndex": dispatch.step_index,
                            "path": dispatch.path,
                        },
                    )
                ],
                now,
                check=False,
            )
            store.insert_outbox(
                tenant_id, dispatch.request_id, run_id, dispatch.step_kind, dispatch.request, now
            )
        store.append(tenant_id, run_id, ev.RUN_STREAM, version, [event], now, check=False)
        store.upsert_run(
            tenant_id,
            run_id,
            definition.name,
            status,
            version + 1,
            definition.fingerprint,
            trigger_event_type,
            now,
        )
    return outcome


def _fail_run(
    store: Store,
    tenant_id: str,
    run_id: str,
    state: ev.RunState,
    version: int,
    step_index: int,
    reason: str,
    error: str,
    now: datetime,
) -> bool:
    payload = {
        "workflowName": state.workflow_name,
        "stepIndex": step_index,
        "error": error,
        "reason": reason,
    }
    if not store.append(
        tenant_id, run_id, ev.RUN_STREAM, version, [_run_event(ev.RUN_FAILED, payload)], now
    ):
        return False
    store.upsert_run(
        tenant_id,
        run_id,
        state.workflow_name,
        "failed",
        version + 1,
        state.fingerprint,
        state.trigger_event_type,
        now,
    )
    return True


# --- start ----------------------------------------------------------------------


def start_run(
    store: Store,
    definition: WorkflowDefinition,
    event: DomainEvent,
    run_id: str,
    now: datetime,
    idempotency_key: str | None = None,
    trigger_ref: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> RunOutcome | None:
    """Start a run and execute it to its first suspension or its end.

    Call inside a transaction. Returns None when the run id already has a stream (a
    second trigger for the same run is a no-op, never a second run on one stream).
    """
    started = {
        "workflowName": definition.name,
        "workflowVersion": definition.version,
        "triggerEventType": event.type,
        "triggerEventRef": trigger_ref,
        "definitionFingerprint": definition.fingerprint,
        **({"idempotencyKey": idempotency_key} if idempotency_key is not None else {}),
        **(extra or {}),
    }
    tenant = event.tenant_id
    if not store.append(
        tenant, run_id, ev.RUN_STREAM, 0, [_run_event(ev.RUN_STARTED, started)], now
    ):
        return None
    result = Interpreter(
        definition, event, run_id, now, dispatch_seed=f"{tenant}|1", run_started_at=now
    ).run()
    return _persist_pass(store, tenant, run_id, definition, event.type, 1, result, now)


def _trigger_failure(
    store: Store,
    definition: WorkflowDefinition,
    event: DomainEvent,
    run_id: str,
    now: datetime,
    error: BaseException,
    reason: str,
) -> RunOutcome | None:
    """Record a run that failed before its first step (filter or key function raised)."""
    log.warning(
        "workflow trigger failed",
        extra={"workflow": definition.name, "event_id": event.id, "detail": repr(error)},
    )
    started = {
        "workflowName": definition.name,
        "workflowVersion": definition.version,
        "triggerEventType": event.type,
        "triggerEventRef": {"eventId": event.id},
        "definitionFingerprint": definition.fingerprint,
    }
    failed = {
        "workflowName": definition.name,
        "triggerEventType": event.type,
        "stepIndex": 0,
        "error": describe_step_error(error),
        "reason": reason,
    }
    tenant = event.tenant_id
    appended = store.append(
        tenant,
        run_id,
        ev.RUN_STREAM,
        0,
        [_run_event(ev.RUN_STARTED, started), _run_event(ev.RUN_FAILED, failed)],
        now,
    )
    if not appended:
        return None
    store.upsert_run(
        tenant, run_id, definition.name, "failed", 2, definition.fingerprint, event.type, now
    )
    return RunOutcome(tenant, run_id, definition.name, "failed", step_index=0, reason=reason)


def ingest_domain_event(
    store: Store, event: DomainEvent, now: datetime, registry: WorkflowRegistry | None = None
) -> IngestResult:
    """Store a domain event in the inbox and start every run it triggers.

    One transaction. A redelivered event starts nothing. A failing trigger filter,
    key function or pipeline is recorded as a failed run and not raised, so the
    event is not redelivered and no side effect repeats.
    """
    registry = registry or default_registry()
    with store.transaction():
        with store.pipeline():
            _store_inbox(store, event, now)
            claimed = store.claim_inbox_trigger(event.tenant_id, event.id, now)
        if not claimed:
            return IngestResult(event.id, stored=False)
        started: list[RunOutcome] = []
        skipped: list[str] = []
        for definition in registry.triggered_by(event.type):
            assert isinstance(definition.trigger, EventTrigger)
            fallback_id = run_id_for(definition.name, f"event:{event.id}")
            try:
                if definition.trigger.filter is not None and not definition.trigger.filter(event):
                    skipped.append(definition.name)
                    continue
            except Exception as error:
                outcome = _trigger_failure(
                    store, definition, event, fallback_id, now, error, "trigger_filter_failed"
                )
                started.extend([outcome] if outcome else [])
                continue
            try:
                key = definition.key_for(event)
            except Exception as error:
                outcome = _trigger_failure(
                    store, definition, event, fallback_id, now, error, "idempotency_key_failed"
                )
                started.extend([outcome] if outcome else [])
                continue
            run_id = run_id_for(definition.name, key) if key is not None else fallback_id
            outcome = start_run(
                store,
                definition,
                event,
                run_id,
                now,
                idempotency_key=key,
                trigger_ref={"eventId": event.id},
            )
            if outcome is None:
                skipped.append(definition.name)
            else:
                started.append(outcome)
        return IngestResult(event.id, stored=True, started=started, skipped=skipped)


# --- awaited events ---------------------------------------------------------------


def _record_match(
    store: Store,
    tenant_id: str,
    run_id: str,
    step_index: int,
    suspension_version: int,
    event_id: str,
    event_type: str,
    now: datetime,
) -> bool:
    """Record the first matching event of an open wait on the run stream (OCC on the
    suspension's version: a second match, or a run that moved on, appends nothing)."""
    appended = store.append(
        tenant_id,
        run_id,
        ev.RUN_STREAM,
        suspension_version,
        [
            _run_event(
                ev.STEP_EVENT_MATCHED,
                {
                    "stepIndex": step_index,
                    "eventId": event_id,
                    "eventType": event_type,
                    "suspensionVersion": suspension_version,
                },
            )
        ],
        now,
    )
    if appended:
        store.mark_pending_matched(tenant_id, run_id, suspension_version, event_type, event_id, now)
    return appended


def wake_on_event(store: Store, event: DomainEvent, now: datetime) -> list[WokenRun]:
    """Store an awaited event and wake every waiting run of its tenant that it matches.

    The match is recorded on each run's stream and its pending row made due now; the
    caller sends the woken rows to the resume queue. A redelivery wakes nothing more.
    """
    with store.transaction():
        with store.pipeline():
            _store_inbox(store, event, now)
            received_at = store.claim_inbox_wakeup(event.tenant_id, event.id, now)
        if received_at is None:
            return []
        # The same lock is taken where the projection creates a waiting row and looks
        # back into the inbox: whichever of the two runs second sees the other's rows.
        store.lock_event_type(event.tenant_id, event.type)
        woken: list[WokenRun] = []
        keys = payload_keys(event.payload)
        for row in store.waiting_rows_for_event(event.tenant_id, event.type, received_at, keys):
            if not matches_safely(row["match_expr"], event.payload):
                continue
            if _record_match(
                store,
                event.tenant_id,
                row["run_id"],
                row["step_index"],
                row["suspension_version"],
                event.id,
                event.type,
                now,
            ):
                woken.append(
                    WokenRun(event.tenant_id, row["run_id"], row["step_index"], event.id, now)
                )
        return woken


def _look_back(store: Store, e: Any, now: datetime) -> WokenRun | None:
    """Find an already-stored event a new wait accepts (arrived before the wait existed)."""
    p = e.payload
    exclude = list(p.get("consumedEventIds") or [])
    since = parse_instant(p["lookbackFrom"]) if p.get("lookbackFrom") else e.recorded_at
    after = 0
    while True:
        rows = store.awaited_event_candidates(e.tenant_id, p["eventType"], since, exclude, after)
        for row in rows:
            if matches_safely(p.get("match"), row["detail"]):
                if _record_match(
                    store,
                    e.tenant_id,
                    e.stream_id,
                    p["stepIndex"],
                    e.version,
                    row["event_id"],
                    p["eventType"],
                    now,
                ):
                    return WokenRun(e.tenant_id, e.stream_id, p["stepIndex"], row["event_id"], now)
                return None
        if len(rows) < 500:
            return None
        after = rows[-1]["position"]


class _PendingDeletes:
    """Deletes of the pending projection, sent as one statement.

    A delete only has to happen before a later write of the same run, so deletes are
    collected and flushed when such a write comes, and at the end of the batch.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.runs: dict[tuple[str, str], None] = {}

    def add(self, tenant_id: str, run_id: str) -> None:
        self.runs[(tenant_id, run_id)] = None

    def before_write(self, tenant_id: str, run_id: str) -> None:
        if (tenant_id, run_id) in self.runs:
            self.flush()

    def flush(self) -> None:
        if self.runs:
            self.store.delete_runs_pending(list(self.runs))
            self.runs.clear()


def _apply_pending(
    store: Store, e: Any, now: datetime, deletes: _PendingDeletes
) -> WokenRun | None:
    p = e.payload
    if e.type in ev.SUSPENSION_TYPES or e.type == ev.STEP_EVENT_MATCHED:
        deletes.before_write(e.tenant_id, e.stream_id)
    if e.type in ev.SUSPENSION_TYPES:
        waits_for_event = e.type == ev.STEP_WAITING_FOR_EVENT
        if waits_for_event:
            store.lock_event_type(e.tenant_id, p["eventType"])
        store.upsert_pending(
            {
                "tenant_id": e.tenant_id,
                "run_id": e.stream_id,
                "step_index": p["stepIndex"],
                "workflow_name": p["workflowName"],
                "suspension_event_type": e.type,
                "wake_at": parse_instant(p["timeoutAt"] if waits_for_event else p["wakeAt"]),
                "retry_attempt": p.get("attempt"),
                "definition_fingerprint": p.get("definitionFingerprint"),
                "wait_event_type": p.get("eventType") if waits_for_event else None,
                "match_expr": p.get("match") if waits_for_event else None,
                "suspension_version": e.version,
                "lookback_from": parse_instant(p["lookbackFrom"])
                if p.get("lookbackFrom")
                else None,
                "match_key": equality_key(p.get("match")) if waits_for_event else None,
            }
        )
        if waits_for_event:
            return _look_back(store, e, now)
    elif e.type == ev.STEP_EVENT_MATCHED:
        store.mark_pending_matched(
            e.tenant_id,
            e.stream_id,
            p["suspensionVersion"],
            p["eventType"],
            p["eventId"],
            e.recorded_at,
        )
    elif e.type in (ev.STEP_RESUMED, *ev.TERMINAL_TYPES):
        deletes.add(e.tenant_id, e.stream_id)
    return None


def project_pending(
    store: Store,
    now: datetime,
    batch_size: int = 1000,
    max_batches: int | None = None,
    horizon_seconds: int | None = None,
) -> ProjectionResult:
    """Catch the pending projection up with the run streams, in commit order.

    Each batch is one transaction that also advances the checkpoint (exactly once).
    Returns the events applied, the waits that an already-stored event satisfied, and
    (with `horizon_seconds`) the suspensions due before `now + horizon_seconds`.
    """
    applied = 0
    woken: list[WokenRun] = []
    soon: dict[tuple[str, str], DueRun] = {}
    limit = None if horizon_seconds is None else now + timedelta(seconds=horizon_seconds)
    batches = 0
    while max_batches is None or batches < max_batches:
        batches += 1
        with store.transaction():
            xid, position = store.lock_checkpoint(PENDING_PROJECTION, now)
            events = store.read_events_after(xid, position, batch_size)
            # Writes whose results are not read travel together; reads sync the pipeline.
            with store.pipeline():
                deletes = _PendingDeletes(store)
                for e in events:
                    if e.stream_type == ev.RUN_STREAM:
                        hit = _apply_pending(store, e, now, deletes)
                        if hit is not None:
                            woken.append(hit)
                        if limit is not None and e.type in ev.SUSPENSION_TYPES:
                            p = e.payload
                            wake_at = parse_instant(p.get("wakeAt") or p["timeoutAt"])
                            if wake_at <= limit:
                                key = (e.tenant_id, e.stream_id)
                                soon[key] = DueRun(*key, p["stepIndex"], wake_at)
                deletes.flush()
                if events:
                    last = events[-1]
                    store.save_checkpoint(PENDING_PROJECTION, last.xid, last.position, now)
        applied += len(events)
        if len(events) < batch_size:
            break
    return ProjectionResult(applied, woken, list(soon.values()))


# --- due and resume -------------------------------------------------------------------


def due_runs(store: Store, tenant_id: str, now: datetime, limit: int = 100) -> list[DueRun]:
    """A tenant's pending rows due at `now`, oldest first."""
    return [
        DueRun(tenant_id, r["run_id"], r["step_index"], r["wake_at"])
        for r in store.due_pending(tenant_id, now, limit)
    ]


def load_run(store: Store, tenant_id: str, run_id: str) -> ev.RunState:
    """Fold a run's stream.

    Raises:
        RunNotFound: the tenant has no run with this id.
    """
    events, trigger = store.load_run_stream(tenant_id, run_id)
    if not events or events[0].type != ev.RUN_STARTED:
        raise RunNotFound(tenant_id, run_id)
    state = ev.fold_run(run_id, tenant_id, events)
    state.trigger_inbox, state.trigger_loaded = trigger, True
    return state


def _restore_results(
    store: Store, tenant_id: str, results: dict[str, Any] | None, refs: dict[str, str | None]
) -> tuple[dict[str, Any], dict[str, str | None]] | None:
    """Results carried on a suspension plus the awaited payloads it references by id
    (None when one of them is no longer stored)."""
    restored = dict(results or {})
    for key, event_id in refs.items():
        if event_id is None:
            restored[key] = None
            continue
        row = store.get_inbox_event(tenant_id, event_id)
        if row is None or row["detail"] is None:
            return None
        restored[key] = row["detail"]
    return restored, refs


def resume_run(
    store: Store,
    tenant_id: str,
    run_id: str,
    step_index: int,
    now: datetime,
    force: bool = False,
    registry: WorkflowRegistry | None = None,
) -> ResumeResult:
    """Resume a suspended run at `step_index`: claim, run to the next suspension or end.

    One transaction. Outcomes: already-resumed (nothing to do: resumed, settled, or
    another worker won the claim), not-due (its time has not come and no awaited event
    matched; `force` overrides), suspended, completed, failed.

    Raises:
        RunNotFound: the tenant has no such run.
    """
    with store.transaction():
        return _resume_in_transaction(
            store, tenant_id, run_id, step_index, now, force, registry or default_registry()
        )


def _resume_in_transaction(
    store: Store,
    tenant_id: str,
    run_id: str,
    step_index: int,
    now: datetime,
    force: bool,
    registry: WorkflowRegistry,
) -> ResumeResult:
    """resume_run's body, inside the caller's transaction. RunNotFound is raised
    before anything is written."""
    state = load_run(store, tenant_id, run_id)
    base = _ResumeKey(tenant_id, run_id, step_index)
    suspension = state.suspension
    if state.status != "waiting" or suspension is None or suspension["stepIndex"] != step_index:
        return base.result("already-resumed")
    matched = state.matched_event_id
    wake_at = state.wake_at
    if matched is None and not force and wake_at is not None and wake_at > now:
        return base.result("not-due", wake_at=wake_at)
    definition = registry.find(state.workflow_name, state.fingerprint)
    if definition is None:
        current = _current_fingerprint(registry, state.workflow_name)
        name = state.workflow_name
        if current is None:
            error = f'Workflow "{name}" is not registered — cannot resume run {run_id}.'
        else:
            error = (
                f'Workflow "{name}" definition changed since run {run_id} started '
                f"(expected {state.fingerprint[:12]}…, current {current[:12]}…)."
            )
        if _fail_run(
            store,
            tenant_id,
            run_id,
            state,
            state.version,
            step_index,
            "workflow_definition_changed",
            error,
            now,
        ):
            return base.result("failed", reason="workflow_definition_changed")
        return base.result("already-resumed")
    if state.suspension_type == ev.STEP_WAITING_FOR_EVENT:
        resumed_by = "event" if matched else "timeout"
    else:
        resumed_by = "timer"
    if force and matched is None and wake_at is not None and wake_at > now:
        resumed_by = "forced"
    claim = _run_event(
        ev.STEP_RESUMED,
        {
            "stepIndex": step_index,
            "path": suspension.get("path"),
            "retryAttempt": suspension.get("attempt"),
            "suspensionVersion": state.suspension_version,
            "awaitedEventId": matched,
            "resumedBy": resumed_by,
        },
    )
    if not store.append(tenant_id, run_id, ev.RUN_STREAM, state.version, [claim], now):
        return base.result("already-resumed")
    version = state.version + 1
    outcome = _continue_run(store, state, definition, suspension, matched, version, now)
    return base.result(
        outcome.outcome,
        suspended_at=outcome.step_index if outcome.outcome == "suspended" else None,
        resumed_wake_at=outcome.wake_at,
        reason=outcome.reason,
        wake_at=wake_at,
    )


@dataclass(frozen=True)
class ResumeRequestItem:
    """One suspension to resume in `resume_runs`."""

    tenant_id: str
    run_id: str
    step_index: int
    force: bool = False


def resume_runs(
    store: Store,
    requests: Sequence[ResumeRequestItem],
    now: datetime,
    registry: WorkflowRegistry | None = None,
) -> list[ResumeResult | Exception]:
    """Resume several suspensions in one transaction: one commit for the batch.

    Each pass is still all or nothing. The batch runs without savepoints (they cost two
    round trips a pass); an unknown run is reported as its RunNotFound, which is raised
    before anything is written. If anything else goes wrong mid-batch, nothing of the
    batch is committed and every request is run again in a transaction of its own, so
    one bad request costs its own pass only. A transient database failure raises: then
    none of the batch happened and all of it may be retried.
    """
    registry = registry or default_registry()
    try:
        results: list[ResumeResult | Exception] = []
        with store.transaction():
            for item in requests:
                try:
                    results.append(
                        _resume_in_transaction(
                            store,
                            item.tenant_id,
                            item.run_id,
                            item.step_index,
                            now,
                            item.force,
                            registry,
                        )
                    )
                except RunNotFound as error:
                    results.append(error)
        return results
    except TransientStoreError:
        raise
    except Exception as error:
        log.warning("resume batch failed, resuming one by one", extra={"detail": repr(error)})
    isolated: list[ResumeResult | Exception] = []
    for item in requests:
        try:
            isolated.append(
                resume_run(
                    store,
                    item.tenant_id,
                    item.run_id,
                    item.step_index,
                    now,
                    force=item.force,
                    registry=registry,
                )
            )
        except TransientStoreError:
            raise
        except Exception as error:  # one bad item must not sink the others
            isolated.append(error)
    return isolated


def _current_fingerprint(registry: WorkflowRegistry, name: str) -> str | None:
    try:
        return registry.latest(name).fingerprint
    except Exception:
        return None


def _load_trigger(store: Store, state: ev.RunState, started: dict[str, Any]) -> DomainEvent | None:
    if started.get("cronScheduledAt"):
        return _cron_event(state.tenant_id, state.workflow_name, started["cronScheduledAt"])
    if state.trigger_event_id is None:
        return None
    if state.trigger_loaded:
        row = state.trigger_inbox
    else:
        row = store.get_inbox_event(state.tenant_id, state.trigger_event_id)
    if row is None or row["detail"] is None:
        return None
    return _inbox_event(row)


def _continue_run(
    store: Store,
    state: ev.RunState,
    definition: WorkflowDefinition,
    suspension: dict[str, Any],
    matched: str | None,
    version: int,
    now: datetime,
    dispatch_seed: str | None = None,
) -> RunOutcome:
    """Re-enter the step tree after a claimed suspension and persist the pass.

    `dispatch_seed` (default: derived from `version`) lets a redrive repeat a failed
    pass with that pass's seed, so dispatches it already requested keep their ids.
    """
    tenant_id, run_id = state.tenant_id, state.run_id
    step_index = int(suspension["stepIndex"])

    def fail(reason: str, error: str) -> RunOutcome:
        _fail_run(store, tenant_id, run_id, state, version, step_index, reason, error, now)
        return RunOutcome(
            tenant_id, run_id, state.workflow_name, "failed", step_index, reason=reason
        )

    trigger = _load_trigger(store, state, state.started_payload)
    if trigger is None:
        return fail(
            "trigger_event_unavailable", f"the trigger event of run {run_id} is no longer stored"
        )
    refs_to_load = dict(suspension.get("awaitedRefs") or {})
    if state.suspension_type == ev.STEP_WAITING_FOR_EVENT:
        refs_to_load[suspension.get("resultKey") or suspension["eventType"]] = matched
    restored = _restore_results(store, tenant_id, suspension.get("results"), refs_to_load)
    if restored is None:
        return fail(
            "awaited_event_unavailable", f"an awaited event of run {run_id} is no longer stored"
        )
    results, refs = restored
    consumed = list(state.consumed_event_ids)
    if matched is not None:
        consumed.append(matched)
    path = suspension.get("path") or [{"i": step_index}]
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
    return _persist_pass(
        store, tenant_id, run_id, definition, state.trigger_event_type, version, result, now
    )


# --- cancel ---------------------------------------------------------------------------


def cancel_run(
    store: Store, tenant_id: str, run_id: str, now: datetime, reason: str | None = None
) -> CancelResult:
    """Cancel a run; idempotent. A cancelled run never resumes.

    Raises:
        RunNotFound: the tenant has no such run.
    """
    for _ in range(10):
        with store.transaction():
            state = load_run(store, tenant_id, run_id)
            if state.status == "cancelled":
                return CancelResult("already-cancelled", tenant_id, run_id, state.status)
            if state.settled:
                return CancelResult("already-settled", tenant_id, run_id, state.status)
            payload: dict[str, Any] = {
                "workflowName": state.workflow_name,
                "stepIndex": (state.suspension or {}).get("stepIndex"),
            }
            if reason:
                payload["reason"] = reason
            if store.append(
                tenant_id,
                run_id,
                ev.RUN_STREAM,
                state.version,
                [_run_event(ev.RUN_CANCELLED, payload)],
                now,
            ):
                store.upsert_run(
                    tenant_id,
                    run_id,
                    state.workflow_name,
                    "cancelled",
                    state.version + 1,
                    state.fingerprint,
                    state.trigger_event_type,
                    now,
                )
                return CancelResult("cancelled", tenant_id, run_id, "cancelled")
    raise RuntimeError(f"run {run_id} kept changing; cancel did not get a turn")


def start_cron_run(
    store: Store,
    definition: WorkflowDefinition,
    tenant_id: str,
    scheduled_at: datetime,
    now: datetime,
) -> RunOutcome | None:
    """Start a cron workflow's run for one scheduled instant (once per instant and tenant)."""
    stamp = format_instant(scheduled_at)
    event = _cron_event(tenant_id, definition.name, stamp)
    run_id = run_id_for(definition.name, f"cron:{stamp}")
    return start_run(store, definition, event, run_id, now, extra={"cronScheduledAt": stamp})
