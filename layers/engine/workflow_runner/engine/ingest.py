"""Ingest: a domain event enters the inbox and starts the runs its type triggers.

TriggerProjection calls `ingest_domain_events` for an intake batch (one transaction)
and `ingest_domain_event` for one event; the due scan calls `start_cron_run` for
each scheduled instant of a cron workflow. A run id derives from the workflow's name
and idempotency key (uuid v5, no tenant), so a redelivered or repeated trigger finds
the stream taken and starts nothing; a failing filter, key function or pipeline is
recorded as a failed run, never raised, so the event is not redelivered and no side
effect repeats.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ..definition import (
    DomainEvent,
    EventTrigger,
    WorkflowDefinition,
    WorkflowRegistry,
    default_registry,
    run_id_for,
)
from ..durations import format_instant
from ..errors import StoreError, TransientStoreError
from ..flow.cancels import cancel_matching
from ..flow.starts import judge_trigger
from ..pass_result import describe_step_error
from ..redaction import exception_for_log
from ..refs import UnresolvedReference
from ..store import Store
from ..stream import RUN_STREAM, RunFailed, RunStarted
from .inbox_writes import store_inbox_events
from .passes import cron_event
from .persist import RunOutcome
from .run_starts import (
    RunStart,
    claim_runs,
    first_pass,
    first_passes,
    run_started,
    start_run,
)

log = logging.getLogger("workflow_runner")

# Reasons of runs that failed before their first step; the key's may carry the path of
# the event field a reference key missed (idempotency_key_failed:event.payload.orderId).
TRIGGER_FILTER_FAILED = "trigger_filter_failed"
IDEMPOTENCY_KEY_FAILED = "idempotency_key_failed"


@dataclass(frozen=True)
class ExistingRun:
    """A run a trigger would have started that exists already (its run id derives from
    the workflow and the idempotency key): the trigger started nothing for it."""

    workflow_name: str
    run_id: str
    idempotency_key: str | None


@dataclass(frozen=True)
class IngestResult:
    """What ingesting one domain event did."""

    event_id: str
    stored: bool  # False: a redelivery of an event already processed
    started: list[RunOutcome] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # workflows whose filter said no / run existed
    existing: list[ExistingRun] = field(default_factory=list)  # of those, the runs that existed
    filtered: list[str] = field(default_factory=list)  # of those, whose filter said no


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
        extra={
            "tenant_id": event.tenant_id,
            "run_id": run_id,
            "workflow": definition.name,
            "event_id": event.id,
            "detail": exception_for_log(error),
        },
    )
    started = RunStarted(
        workflow_name=definition.name,
        workflow_version=definition.version,
        trigger_event_type=event.type,
        trigger_event_id=event.id,
        definition_fingerprint=definition.fingerprint,
    )
    failed = RunFailed(
        workflow_name=definition.name,
        trigger_event_type=event.type,
        step_index=0,
        error=describe_step_error(error),
        reason=reason,
    )
    tenant = event.tenant_id
    if not store.streams.append(tenant, run_id, RUN_STREAM, 0, [started, failed], now):
        return None
    store.runs.upsert(
        tenant,
        run_id,
        definition.name,
        "failed",
        2,
        definition.fingerprint,
        event.type,
        now,
        workflow_version=definition.version,
    )
    return RunOutcome(tenant, run_id, definition.name, "failed", step_index=0, reason=reason)


def _failed_unkeyed(
    store: Store,
    definition: WorkflowDefinition,
    event: DomainEvent,
    now: datetime,
    error: BaseException,
    reason: str,
) -> RunOutcome | None:
    """_trigger_failure for a run whose key is not known (its filter or key function
    raised): it gets the run id of one run per trigger event."""
    run_id = _fallback_id(definition, event)
    return _trigger_failure(store, definition, event, run_id, now, error, reason)


def _prepare_start(
    store: Store, definition: WorkflowDefinition, event: DomainEvent, now: datetime
) -> RunOutcome | RunStart | None:
    """What a trigger event does to one workflow: a run to start, nothing (filtered
    out), or a run recorded as failed at once (its filter or key function raised)."""
    assert isinstance(definition.trigger, EventTrigger)
    try:
        if definition.trigger.filter is not None and not definition.trigger.filter(event):
            return None
    except Exception as error:
        return _failed_unkeyed(store, definition, event, now, error, TRIGGER_FILTER_FAILED)
    try:
        key = definition.key_for(event)
    except Exception as error:
        # A reference names the field it missed (its path is the definition's, never the
        # data's), as a step's unresolved_reference:<path> does.
        where = f":{error.path}" if isinstance(error, UnresolvedReference) else ""
        reason = f"{IDEMPOTENCY_KEY_FAILED}{where}"
        return _failed_unkeyed(store, definition, event, now, error, reason)
    run_id = (
        run_id_for(definition.name, key) if key is not None else _fallback_id(definition, event)
    )
    flow = definition.flow
    judged = (
        judge_trigger(store, definition, event, run_id, now) if flow and flow.gates_start else None
    )
    if judged is not None and judged.verdict != "start":
        return None  # skipped (recorded, with the reason) or folded into a debounce
    run_id = judged.run_id if judged is not None else run_id
    started = run_started(definition, event, idempotency_key=key, trigger_event_id=event.id)
    return RunStart(definition, event, run_id, started, judged.held if judged else None)


def _start_triggered(
    store: Store, definition: WorkflowDefinition, event: DomainEvent, now: datetime
) -> RunOutcome | ExistingRun | None:
    """Start one workflow's run for a trigger event (None: filtered out)."""
    start = _prepare_start(store, definition, event, now)
    if not isinstance(start, RunStart):
        return start
    tenant = event.tenant_id
    if not store.streams.append(tenant, start.run_id, RUN_STREAM, 0, [start.started], now):
        return _existing(start)
    return first_pass(store, start, now)


def _fallback_id(definition: WorkflowDefinition, event: DomainEvent) -> str:
    """The run id of a workflow without an idempotency key (or whose key function
    failed): one run per trigger event."""
    return run_id_for(definition.name, f"event:{event.id}")


def _run_id_of(definition: WorkflowDefinition, event: DomainEvent) -> str:
    """The run id a trigger event gives a workflow's run (its fallback when the key
    function fails)."""
    try:
        key = definition.key_for(event)
    except Exception:
        key = None
    return run_id_for(definition.name, key) if key is not None else _fallback_id(definition, event)


def _refused(
    store: Store,
    definition: WorkflowDefinition,
    event: DomainEvent,
    now: datetime,
    error: Exception,
) -> RunOutcome | None:
    """The database refused what a run's first pass wrote: the run is recorded as failed
    (reason pass_not_storable), so the event is not redelivered forever."""
    run_id = _run_id_of(definition, event)
    return _trigger_failure(store, definition, event, run_id, now, error, "pass_not_storable")


def _start_isolated(
    store: Store, definition: WorkflowDefinition, event: DomainEvent, now: datetime
) -> RunOutcome | ExistingRun | None:
    """Start one workflow's run in a savepoint: if the database refuses what its first
    pass wrote, that run fails (see _refused) and the event's other workflows still
    start."""
    try:
        with store.transaction():
            return _start_triggered(store, definition, event, now)
    except TransientStoreError:
        raise
    except StoreError as error:
        with store.transaction():
            return _refused(store, definition, event, now, error)


def _store_and_claim(store: Store, events: Sequence[DomainEvent], now: datetime) -> set[int]:
    """Store events and claim them for triggering; the indexes of those claimed now
    (the others are redeliveries: an event listed twice is claimed once). An event
    stored now is stored claimed, in one statement; only when some were stored before
    (by EventWakeup, or a redelivery) does a second statement claim those, unless
    their triggers were claimed already. It sees what committed before it began: an
    event whose first store was still uncommitted when this one tried is stored by now,
    or was rolled back and this call stored it."""
    first: dict[tuple[str, str], int] = {}
    for n, event in enumerate(events):
        first.setdefault((event.tenant_id, event.id), n)
    unique = [events[n] for n in first.values()]
    claimed = store_inbox_events(store, unique, now, claim_triggers=True)()
    before = [key for key in first if key not in claimed]
    if before:
        claimed |= store.inbox.claim_triggers(before, now)()
    return {n for key, n in first.items() if key in claimed}


# What the plan of a batch holds per workflow: a run to start, or what became of it.
_Planned = RunOutcome | ExistingRun | RunStart | None


def _ingest_in_transaction(
    store: Store, events: Sequence[DomainEvent], now: datetime, registry: WorkflowRegistry
) -> list[IngestResult]:
    """Store, claim and start, inside the caller's transaction, in few statements for
    the whole batch: the events are stored and claimed together, the runs of events
    that trigger one workflow (the common case) are claimed in one statement per
    tenant, and their first passes' writes go out in one pipeline. An event with one
    workflow has no savepoint, so a refused first pass raises StoreError and the caller
    redoes the work recording the refusal; with several, each start has its own
    savepoint and a refusal fails only that run. Of two starts of one run id in a batch
    the first (in event order) starts it; the other is skipped, as a redelivery."""
    claimed = _store_and_claim(store, events, now)
    for n in sorted(claimed):  # cancel_on: before the runs the event starts
        cancel_matching(store, registry, events[n], now)
    planned: list[list[tuple[WorkflowDefinition, _Planned]] | None] = []
    for n, event in enumerate(events):
        if n not in claimed:
            planned.append(None)
            continue
        definitions = registry.triggered_by(event.type)
        if len(definitions) == 1:
            (definition,) = definitions
            planned.append([(definition, _prepare_start(store, definition, event, now))])
        else:
            planned.append([(d, _start_isolated(store, d, event, now)) for d in definitions])
    starts = [p for plan in planned for _, p in plan or () if isinstance(p, RunStart)]
    ran = dict(
        zip(
            map(id, starts),
            first_passes(store, starts, claim_runs(store, starts, now), now),
            strict=True,
        )
    )
    results: list[IngestResult] = []
    for event, plan in zip(events, planned, strict=True):
        if plan is None:
            results.append(IngestResult(event.id, stored=False))
            continue
        outcomes = [(d, _ran(p, ran) if isinstance(p, RunStart) else p) for d, p in plan]
        results.append(_ingested(event, outcomes))
    return results


def ingest_domain_event(
    store: Store, event: DomainEvent, now: datetime, registry: WorkflowRegistry | None = None
) -> IngestResult:
    """Store a domain event in the inbox and start every run it triggers.

    One transaction. A redelivered event starts nothing. A failing trigger filter,
    key function or pipeline is recorded as a failed run and not raised, so the
    event is not redelivered and no side effect repeats.
    """
    registry = registry or default_registry()
    try:
        with store.transaction():
            (result,) = _ingest_in_transaction(store, [event], now, registry)
            return result
    except TransientStoreError:
        raise
    except StoreError as error:
        definitions = registry.triggered_by(event.type)
        if len(definitions) != 1:
            raise  # not a refused first pass: those fail their own savepoint
        (definition,) = definitions
        refusal = error
    # The database refused the run's first pass: redo the transaction recording that.
    with store.transaction():
        if not _store_and_claim(store, [event], now):
            return IngestResult(event.id, stored=False)
        cancel_matching(store, registry, event, now)
        return _ingested(event, [(definition, _refused(store, definition, event, now, refusal))])


def ingest_domain_events(
    store: Store,
    events: Sequence[DomainEvent],
    now: datetime,
    registry: WorkflowRegistry | None = None,
) -> list[IngestResult]:
    """Ingest a batch of domain events (an SQS intake batch) in one transaction.

    Each event does what `ingest_domain_event` does for it, but the batch commits once
    (a commit waits for the WAL flush: most of what ingesting one event costs). Events
    are taken in (tenant, id) order, so two batches lock inbox rows in the same order
    (two events with different ids may still start the same run: two batches that meet
    there can deadlock, which PostgreSQL breaks by failing one of them, a transient
    error). If the database refuses an event's first pass, the batch is redone one
    event per transaction, so that refusal is recorded on its own run. A transient
    error (connection, serialization, deadlock) rolls back the whole batch and is
    raised: the caller tries again, and a redelivery starts nothing twice.

    Returns:
        One IngestResult per event, in the order given.
    """
    registry = registry or default_registry()
    if len(events) <= 1:
        return [ingest_domain_event(store, e, now, registry) for e in events]
    order = sorted(range(len(events)), key=lambda i: (events[i].tenant_id, events[i].id))
    try:
        with store.transaction():
            ingested = _ingest_in_transaction(store, [events[i] for i in order], now, registry)
    except TransientStoreError:
        raise
    except StoreError:
        return [ingest_domain_event(store, e, now, registry) for e in events]
    results = dict(zip(order, ingested, strict=True))
    return [results[i] for i in range(len(events))]


def _ingested(
    event: DomainEvent,
    outcomes: Sequence[tuple[WorkflowDefinition, RunOutcome | ExistingRun | None]],
) -> IngestResult:
    started = [outcome for _, outcome in outcomes if isinstance(outcome, RunOutcome)]
    existing = [outcome for _, outcome in outcomes if isinstance(outcome, ExistingRun)]
    filtered = [d.name for d, outcome in outcomes if outcome is None]
    return IngestResult(
        event.id,
        stored=True,
        started=started,
        skipped=[d.name for d, o in outcomes if not isinstance(o, RunOutcome)],
        existing=existing,
        filtered=filtered,
    )


def _ran(start: RunStart, ran: dict[int, RunOutcome | None]) -> RunOutcome | ExistingRun:
    """What became of a start of the batch: its first pass, or the run that existed."""
    outcome = ran[id(start)]
    return outcome if outcome is not None else _existing(start)


def _existing(start: RunStart) -> ExistingRun:
    return ExistingRun(start.definition.name, start.run_id, start.started.idempotency_key)


def start_cron_run(
    store: Store,
    definition: WorkflowDefinition,
    tenant_id: str,
    scheduled_at: datetime,
    now: datetime,
) -> RunOutcome | None:
    """Start a cron workflow's run for one scheduled instant (once per instant and tenant)."""
    stamp = format_instant(scheduled_at)
    event = cron_event(tenant_id, definition.name, stamp)
    run_id = run_id_for(definition.name, f"cron:{stamp}")
    return start_run(store, definition, event, run_id, now, cron_scheduled_at=stamp)
