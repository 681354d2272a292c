"""Starting runs: a run's first event claims its id (version 1 of its stream), and its
first pass runs in the same transaction — one run at a time (`start_run`), or a batch
in a few round trips (`claim_runs`, then `first_passes`), as an intake batch of trigger
events (ingest.py) and a batch of child runs (children.py) start theirs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from ..callback_tokens import new_run_secret
from ..definition import DomainEvent, WorkflowDefinition
from ..flow.cancels import register_cancel_keys
from ..flow.starts import first_passes_slots, hold_or_start
from ..interpreter import Interpreter
from ..store import Store
from ..stream import RUN_STREAM, FlowHeld, RunStarted
from .persist import PassWrites, RunOutcome, persist_pass


def start_run(
    store: Store,
    definition: WorkflowDefinition,
    event: DomainEvent,
    run_id: str,
    now: datetime,
    idempotency_key: str | None = None,
    trigger_event_id: str | None = None,
    cron_scheduled_at: str | None = None,
    parent_run_id: str | None = None,
    map_index: int | None = None,
) -> RunOutcome | None:
    """Start a run and execute it to its first suspension or its end.

    Call inside a transaction. Returns None when the run id already has a stream (a
    second trigger for the same run is a no-op, never a second run on one stream).
    `parent_run_id` and `map_index` are recorded on its start (a child run's ctx reads
    them), never in its run id or its input.
    """
    start = RunStart(
        definition,
        event,
        run_id,
        run_started(
            definition,
            event,
            idempotency_key=idempotency_key,
            trigger_event_id=trigger_event_id,
            cron_scheduled_at=cron_scheduled_at,
            parent_run_id=parent_run_id,
            map_index=map_index,
        ),
    )
    if not store.streams.append(event.tenant_id, run_id, RUN_STREAM, 0, [start.started], now):
        return None
    return first_pass(store, start, now)


@dataclass(frozen=True)
class RunStart:
    """A run to start: its first event, appended at version 1 (its claim on the id)."""

    definition: WorkflowDefinition
    event: DomainEvent
    run_id: str
    started: RunStarted
    held: FlowHeld | None = None  # flow control holds it before its first pass
    # Its batch took its first pass's concurrency slots already; `held` says if it got
    # them (first_passes: one statement for the batch, not one round trip per run).
    slots_judged: bool = False


def run_started(
    definition: WorkflowDefinition,
    event: DomainEvent,
    idempotency_key: str | None = None,
    trigger_event_id: str | None = None,
    cron_scheduled_at: str | None = None,
    parent_run_id: str | None = None,
    map_index: int | None = None,
) -> RunStarted:
    """A run's first event."""
    return RunStarted(
        workflow_name=definition.name,
        workflow_version=definition.version,
        trigger_event_type=event.type,
        trigger_event_id=trigger_event_id,
        definition_fingerprint=definition.fingerprint,
        idempotency_key=idempotency_key,
        cron_scheduled_at=cron_scheduled_at,
        callback_secret=new_run_secret() if definition.takes_callbacks else None,
        parent_run_id=parent_run_id,
        map_index=map_index,
    )


def first_pass(
    store: Store, start: RunStart, now: datetime, writes: PassWrites | None = None
) -> RunOutcome:
    """A started run's first pass, persisted (`writes`: see persist_pass)."""
    definition, event, started = start.definition, start.event, start.started
    tenant = event.tenant_id
    if definition.flow is not None:
        if definition.flow.cancel_on:
            register_cancel_keys(store, definition, event, start.run_id, now)
        add = None if writes is None else (lambda write: writes.add(write, now))
        held = hold_or_start(
            store,
            definition,
            event,
            start.run_id,
            started,
            start.held,
            now,
            add,
            slots_judged=start.slots_judged,
        )
        if held is not None:
            return RunOutcome(tenant, start.run_id, definition.name, "suspended", 0, held.wake_at)
    result = Interpreter(
        definition,
        event,
        start.run_id,
        now,
        dispatch_seed=f"{tenant}|1",
        run_started_at=now,
        callback_secret=started.callback_secret,
        parent_run_id=started.parent_run_id,
        map_index=started.map_index,
    ).run()
    return persist_pass(store, tenant, start.run_id, definition, event.type, 1, result, now, writes)


def claim_runs(store: Store, starts: Sequence[RunStart], now: datetime) -> set[int]:
    """Append each start's first event at version 1 (StreamStore.append_to_runs: one
    statement per tenant); the ids (`id()`) of the starts that got their run. A run id
    taken already, or by an earlier start of the list, is not started again."""
    first: dict[tuple[str, str], RunStart] = {}
    for start in starts:
        first.setdefault((start.event.tenant_id, start.run_id), start)
    appends = [(tenant, run_id, 0, start.started) for (tenant, run_id), start in first.items()]
    return {id(first[key]) for key in store.streams.append_to_runs(appends, now)}


def first_passes(
    store: Store, starts: Sequence[RunStart], won: set[int], now: datetime
) -> list[RunOutcome | None]:
    """The first passes of the starts that got their run (`won`, from claim_runs), their
    writes in one pipeline (what else the caller's pipeline holds back goes out with
    it); None for the others. Then the joins the runs that ended closed as parents are
    closed (see PassWrites.finish)."""
    ready = _slots_judged(store, [s if id(s) in won else None for s in starts], now)
    writes = PassWrites()
    with store.pipeline():
        outcomes = [None if s is None else first_pass(store, s, now, writes) for s in ready]
        writes.flush(store)
    writes.finish(store)
    return outcomes


def _slots_judged(
    store: Store, starts: Sequence[RunStart | None], now: datetime
) -> list[RunStart | None]:
    """The starts (None: one that did not get its run) with their first passes'
    concurrency slots taken together: one statement for the batch, not one round trip
    per run inside the batch's pipeline."""
    asking = [
        (n, s)
        for n, s in enumerate(starts)
        if s is not None
        and s.held is None
        and s.definition.flow is not None
        and s.definition.flow.concurrency
    ]
    if not asking:
        return list(starts)
    verdicts = first_passes_slots(
        store, [(s.definition, s.event, s.run_id) for _, s in asking], now
    )
    ready = list(starts)
    for (n, start), verdict in zip(asking, verdicts, strict=True):
        ready[n] = replace(start, held=verdict, slots_judged=True)
    return ready
