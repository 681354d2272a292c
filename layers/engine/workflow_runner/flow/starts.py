"""A trigger judged before its run starts: skipped (rate limit, singleton), cancelling
the key's run first (singleton "cancel"), folded into a waiting debounce, held until its
throttle turn, or started — in the transaction that stores the trigger event.

Each decision reads and changes the key's row (`flow_limits`) under its row lock, so
two triggers of one key are judged one after the other on every Lambda: a rate limit
never admits one too many, a singleton never starts two, a debounce never loses a
trigger. The first pass then takes the run's concurrency slots (`first_pass_slots`);
when none is free the run is held at once, due now, and its resume queues it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from ..definition import DomainEvent, WorkflowDefinition, run_id_for
from ..durations import parse_duration
from ..store import PassWrite, RunSummaryWrite, Store
from ..stream import RUN_STREAM, FlowHeld, RunStarted, fold_run
from .constructs import FlowControl
from .keys import event_context, flow_key, in_context, key_value, start_throttle
from .limits import LimitSpec
from .passes import admit_passes, pass_work
from .store import SkippedTrigger

Verdict = Literal["start", "skip", "debounced", "batched"]


@dataclass(frozen=True)
class Judged:
    """What flow control decided for one trigger: `start` the run `run_id` (held by
    `held` instead of its first pass when set), `skip` it (recorded), or `debounced`
    (folded into the waiting run `run_id`)."""

    verdict: Verdict
    run_id: str
    held: FlowHeld | None = None


def _spec(
    definition: WorkflowDefinition,
    event: DomainEvent,
    kind: str,
    value: str,
    limit: int,
    period: str | None,
) -> LimitSpec:
    return LimitSpec(
        flow_key=flow_key(kind, "tenant", event.tenant_id, definition.name, None, value),
        kind=kind,  # type: ignore[arg-type]
        limit=limit,
        tenant_id=event.tenant_id,
        workflow_name=definition.name,
        key_value=value,
        period_ms=int(parse_duration(period).total_seconds() * 1000) if period else 0,
    )


def judge_trigger(
    store: Store, definition: WorkflowDefinition, event: DomainEvent, run_id: str, now: datetime
) -> Judged:
    """Decide, in the caller's transaction, what a trigger event does to a workflow with
    flow control (`definition.flow` set): see the module docstring. `run_id` is the run
    the trigger would start; a debounce names its own (per key and first trigger)."""
    flow = definition.flow
    assert flow is not None
    resolve = in_context(event_context(definition, event, run_id, now))
    if flow.rate_limit is not None:
        limit = flow.rate_limit
        spec = _spec(
            definition,
            event,
            "rate_limit",
            key_value(limit.key, resolve),
            limit.limit,
            limit.period,
        )
        if not _rate_admits(store, spec, parse_duration(limit.period), now):
            _skip(
                store,
                definition,
                event,
                spec,
                "rate_limit",
                f"more than {limit.limit} per {limit.period}",
                None,
                now,
            )
            return Judged("skip", run_id)
    if flow.singleton is not None:
        spec = _spec(
            definition, event, "singleton", key_value(flow.singleton.key, resolve), 1, None
        )
        locked = store.flow.lock_limit(spec, "singleton", now)
        if locked.run_id is not None and locked.run_id != run_id and _unsettled(locked.run_status):
            if flow.singleton.mode == "skip":
                _skip(
                    store,
                    definition,
                    event,
                    spec,
                    "singleton",
                    "a run of this key has not settled",
                    locked.run_id,
                    now,
                )
                return Judged("skip", run_id)
            _cancel(store, event, locked.run_id, f"singleton: replaced by event {event.id}", now)
        store.flow.set_state(spec, [], run_id, now)
    if flow.debounce is not None:
        return _debounce(store, definition, event, flow, resolve, now)
    if flow.batch is not None:
        return _batch(store, definition, event, flow, resolve, now)
    throttle = start_throttle(flow, definition, event_context(definition, event, run_id, now))
    if throttle is not None:
        turn = store.flow.reserve_turn(throttle, now)
        if turn > now:
            return Judged(
                "start", run_id, _held(definition, event, turn, "throttle", throttle.label)
            )
    return Judged("start", run_id)


def _unsettled(status: str | None) -> bool:
    return status in ("running", "waiting")


def _rate_admits(store: Store, spec: LimitSpec, period: timedelta, now: datetime) -> bool:
    """A sliding window: admitted when fewer than `limit` triggers were admitted within
    the period before now (the admissions are kept on the key's locked row)."""
    locked = store.flow.lock_limit(spec, "rate_limit", now)
    recent = sorted(t for t in locked.recent if t > now - period)
    admitted = len(recent) < spec.limit
    if admitted:
        recent.append(now)
    store.flow.set_state(spec, recent, None, now)
    return admitted


def _skip(
    store: Store,
    definition: WorkflowDefinition,
    event: DomainEvent,
    spec: LimitSpec,
    reason: str,
    detail: str,
    run_id: str | None,
    now: datetime,
) -> None:
    key = f" (key {spec.key_value!r})" if spec.key_value else ""
    store.flow.record_skip(
        SkippedTrigger(
            tenant_id=event.tenant_id,
            event_id=event.id,
            workflow_name=definition.name,
            reason=reason,
            flow_key=spec.flow_key,
            detail=f"{reason}: {detail}{key}",
            run_id=run_id,
            skipped_at=now,
        )
    )


def _cancel(store: Store, event: DomainEvent, run_id: str, reason: str, now: datetime) -> None:
    # Imported here: cancelling belongs to the engine's join protocol (engine/joins.py),
    # which imports the stages that import this module.
    from ..engine.joins import cancel_in_transaction

    cancel_in_transaction(store, event.tenant_id, run_id, now, reason)


def _held(
    definition: WorkflowDefinition,
    event: DomainEvent,
    until: datetime,
    reason: str,
    label: str,
    event_id: str | None = None,
    first_at: datetime | None = None,
) -> FlowHeld:
    return FlowHeld(
        workflow_name=definition.name,
        trigger_event_type=event.type,
        step_index=0,
        path=[{"i": 0}],
        definition_fingerprint=definition.fingerprint,
        wake_at=until,
        reason=reason,
        limit=label,
        event_id=event_id,
        first_at=first_at,
    )


def _debounce(
    store: Store,
    definition: WorkflowDefinition,
    event: DomainEvent,
    flow: FlowControl,
    resolve: object,
    now: datetime,
) -> Judged:
    """Fold the trigger into the key's waiting run (a newer held fact: later wake time,
    this event), or start a new held run when none waits (its wait ended, or it was
    claimed a moment ago: the append then loses the version and a new run starts)."""
    debounce = flow.debounce
    assert debounce is not None
    value = key_value(debounce.key, resolve)  # type: ignore[arg-type]
    spec = _spec(definition, event, "debounce", value, 1, debounce.period)
    locked = store.flow.lock_limit(spec, "debounce", now)
    period = parse_duration(debounce.period)
    label = f"debounce {debounce.period} of {definition.name}" + (
        f" key {value!r}" if value else ""
    )
    if locked.run_id is not None and locked.run_status == "waiting":
        events, _ = store.streams.load_run(event.tenant_id, locked.run_id, tail=True)
        state = fold_run(locked.run_id, event.tenant_id, [e.recorded for e in events])
        held = state.suspension
        if isinstance(held, FlowHeld) and held.reason == "debounce":
            first = held.first_at or now
            until = now + period
            if debounce.timeout is not None:
                until = min(until, first + parse_duration(debounce.timeout))
            newer = _held(definition, event, until, "debounce", label, event.id, first)
            if store.streams.append(
                event.tenant_id, locked.run_id, RUN_STREAM, state.version, [newer], now
            ):
                return Judged("debounced", locked.run_id)
    run_id = run_id_for(definition.name, f"debounce:{value}:{event.id}")
    store.flow.set_state(spec, [], run_id, now)
    held = _held(definition, event, now + period, "debounce", label, event.id, now)
    return Judged("start", run_id, held)


def _batch(
    store: Store,
    definition: WorkflowDefinition,
    event: DomainEvent,
    flow: FlowControl,
    resolve: object,
    now: datetime,
) -> Judged:
    """Add the trigger to the key's open batch (a newer held fact naming it; due now
    once the batch is full, and the key's next trigger opens a new one), or open a new
    batch: a run held until `timeout` from now, its first event this one. A batch whose
    run was claimed a moment ago loses the append: a new batch opens."""
    batch = flow.batch
    assert batch is not None
    value = key_value(batch.key, resolve)  # type: ignore[arg-type]
    spec = _spec(definition, event, "batch", value, batch.max_size, batch.timeout)
    locked = store.flow.lock_limit(spec, "batch", now)
    label = f"batch of {batch.max_size} or {batch.timeout} of {definition.name}" + (
        f" key {value!r}" if value else ""
    )
    if locked.run_id is not None and locked.run_status == "waiting":
        events, _ = store.streams.load_run(event.tenant_id, locked.run_id)
        state = fold_run(locked.run_id, event.tenant_id, [e.recorded for e in events])
        held = state.suspension
        if isinstance(held, FlowHeld) and held.reason == "batch":
            full = len(state.batch_event_ids) + 1 >= batch.max_size
            until = now if full else held.wake_at
            newer = _held(definition, event, until, "batch", label, event.id, held.first_at)
            if store.streams.append(
                event.tenant_id, locked.run_id, RUN_STREAM, state.version, [newer], now
            ):
                if full:
                    store.flow.set_state(spec, [], None, now)
                return Judged("batched", locked.run_id)
    run_id = run_id_for(definition.name, f"batch:{value}:{event.id}")
    full = batch.max_size == 1
    store.flow.set_state(spec, [], None if full else run_id, now)
    until = now if full else now + parse_duration(batch.timeout)
    held = _held(definition, event, until, "batch", label, event.id, now)
    return Judged("start", run_id, held)


def hold_or_start(
    store: Store,
    definition: WorkflowDefinition,
    event: DomainEvent,
    run_id: str,
    started: RunStarted,
    held: FlowHeld | None,
    now: datetime,
    add: Callable[[PassWrite], None] | None = None,
    slots_judged: bool = False,
) -> FlowHeld | None:
    """Before a new run's first pass (its RunStarted at version 1): hold it by `held`
    (judge_trigger's verdict), or by its concurrency when no slot is free for its first
    pass; the held fact written, or None to run the first pass now (its slots taken).
    `add`: the batch's writes to join (else the write goes out now). `slots_judged`:
    its batch took the slots already (`first_passes_slots`), and `held` says so."""
    if held is None and not slots_judged:
        held = first_pass_slots(store, definition, event, run_id, now)
    if held is None:
        return None
    # Imported here: the engine's stages import this module.
    from ..engine.pinning import ensure_registered

    ensure_registered(store, definition, now)
    write = PassWrite(
        event.tenant_id,
        run_id,
        1,
        [held],
        RunSummaryWrite(
            event.tenant_id,
            run_id,
            definition.name,
            "waiting",
            definition.fingerprint,
            started.trigger_event_type,
            workflow_version=definition.version,
        ),
    )
    if add is not None:
        add(write)
    else:
        store.streams.record_passes([write], now)
    return held


def first_pass_slots(
    store: Store, definition: WorkflowDefinition, event: DomainEvent, run_id: str, now: datetime
) -> FlowHeld | None:
    """Take a new run's concurrency slots for its first pass; when one is not free (or
    held work of its key waits first), the held fact to write instead: due now, so its
    resume queues it behind that work."""
    return first_passes_slots(store, [(definition, event, run_id)], now)[0]


def first_passes_slots(
    store: Store,
    starts: Sequence[tuple[WorkflowDefinition, DomainEvent, str]],
    now: datetime,
) -> list[FlowHeld | None]:
    """`first_pass_slots` for a batch of new runs (definition, trigger, run id), their
    slots taken in one statement (admit_passes): per run, the held fact, or None to run
    its first pass now (its slots taken, or none needed)."""
    works = [pass_work(d, event, run_id, 0, now) for d, event, run_id in starts]
    asking = [(n, work) for n, work in enumerate(works) if work is not None]
    held = admit_passes(store, [work for _, work in asking], now, queue_held=False)
    verdicts: list[FlowHeld | None] = [None] * len(starts)
    for at in held:
        n, work = asking[at]
        definition, event, _ = starts[n]
        label = "; ".join(spec.label for spec in work.slots)
        verdicts[n] = _held(definition, event, now, "concurrency", label)
    return verdicts
