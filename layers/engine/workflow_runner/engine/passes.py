"""A pass over a run: load what it needs, re-enter its step tree, persist where it stopped.

Shared by every stage that moves a run forward — the start (ingest), the resume, the
redrive — so that a pass is read and written one way only (writing: persist.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..definition import DomainEvent, WorkflowDefinition
from ..definition.branches import family_base
from ..durations import parse_instant
from ..errors import RunNotFound
from ..fast_init import fast_init
from ..interpreter import Interpreter
from ..pass_result import (
    ChildFailedError,
    Reentry,
    ResumedCondition,
    ResumedTask,
    TaskFailedError,
    ToleranceExceededError,
    WorkflowStepError,
)
from ..step_paths import step_at
from ..store import InboxEvent, Store, StoredEvent, StoredResults
from ..stream import (
    CALLBACK_EVENT_TYPE,
    ChildrenWaiting,
    FlowHeld,
    RunStarted,
    RunState,
    StepWaitingForCallback,
    StepWaitingForCondition,
    StepWaitingForEvent,
    SuspensionFact,
    TaskCompleted,
    TaskOutcome,
    TaskScheduled,
    TasksScheduled,
    fold_run,
)
from .batches import map_batch, parallel_batch, tolerance_failure
from .callback_passes import close_unanswered_await, known_callbacks
from .persist import PassWrites, RunOutcome, fail_run, persist_pass

__all__ = [
    "LoadedRun",
    "Redo",
    "RunOutcome",
    "continue_run",
    "domain_event_of",
    "load_run",
    "load_run_for_pass",
    "load_runs_for_resume",
    "restore_results",
    "trigger_event",
]


@dataclass
class LoadedRun:
    """A run's stream, folded, with its trigger event's inbox row (read together).

    `events` is the whole stream, or only its tail (the first event and those from the
    last pass's outcome on) when loaded for a resume.
    """

    state: RunState
    events: list[StoredEvent]
    trigger_row: InboxEvent | None
    results: StoredResults | None = None  # read with the stream (a resume); None: read later
    # The inbox rows of the events its suspension awaited, by event id, read with its
    # stream (a resume; None for one not stored); None, or an id not in it: the pass
    # reads it.
    awaited: dict[str, InboxEvent | None] | None = None


# --- reading a run ----------------------------------------------------------------------


def load_run_for_pass(store: Store, tenant_id: str, run_id: str, tail: bool = False) -> LoadedRun:
    """A run's stream (or its tail, `tail=True`) and trigger row in one round trip.

    Raises:
        RunNotFound: the tenant has no run with this id.
    """
    events, trigger = store.streams.load_run(tenant_id, run_id, tail=tail)
    if not events or not isinstance(events[0].fact, RunStarted):
        raise RunNotFound(tenant_id, run_id)
    state = fold_run(run_id, tenant_id, [e.recorded for e in events])
    return LoadedRun(state, events, trigger)


def load_runs_for_resume(
    store: Store, runs: list[tuple[str, str]]
) -> list[LoadedRun | RunNotFound]:
    """The tails, trigger rows and current results of several (tenant, run), in one
    round trip; RunNotFound in place of a run the tenant does not have."""
    loaded: list[LoadedRun | RunNotFound] = []
    for (tenant_id, run_id), read in zip(runs, store.streams.load_for_resume(runs), strict=True):
        events = read.events
        if not events or not isinstance(events[0].fact, RunStarted):
            loaded.append(RunNotFound(tenant_id, run_id))
            continue
        state = fold_run(run_id, tenant_id, [e.recorded for e in events])
        loaded.append(LoadedRun(state, events, read.trigger, read.results, read.matched))
    return loaded


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


def trigger_event(store: Store, run: LoadedRun, debounced: bool = False) -> DomainEvent | None:
    """The run's trigger event (None when it is no longer stored, e.g. erased).

    `debounced`: its workflow has a Debounce, so the run starts with its key's last
    trigger, named by the held facts before its first step; a tail read after the first
    pass no longer has them, and the whole stream is read for them."""
    state = run.state
    started = state.started
    if started is not None and started.cron_scheduled_at:
        return cron_event(state.tenant_id, state.workflow_name, started.cron_scheduled_at)
    if state.trigger_event_id is None:
        return None
    row = run.trigger_row
    override = state.trigger_override
    if override is None and debounced:
        override = _whole_stream_state(store, state).trigger_override
    if override is not None:  # a debounce's last trigger
        row = store.inbox.get(state.tenant_id, override)
    if row is None or row.detail is None:
        return None
    return domain_event_of(row)


def _whole_stream_state(store: Store, state: RunState) -> RunState:
    """A run's state folded from its whole stream: what only the held facts before its
    first step name (a debounce's last trigger, a batch's events), which a tail read
    after the first pass no longer has."""
    events, _ = store.streams.load_run(state.tenant_id, state.run_id)
    return fold_run(state.run_id, state.tenant_id, [e.recorded for e in events])


def batch_events(store: Store, state: RunState, batched: bool) -> tuple[DomainEvent, ...] | None:
    """A batch run's trigger events in arrival order (`batched`: its workflow has a
    Batch; () for another run; None when one is no longer stored). The held facts that
    name them may precede the tail a resume reads: the whole stream is read for them."""
    if not batched:
        return ()
    ids = _whole_stream_state(store, state).batch_event_ids
    found = []
    for event_id in ids:
        row = store.inbox.get(state.tenant_id, event_id)
        if row is None or row.detail is None:
            return None
        found.append(domain_event_of(row))
    return tuple(found)


@fast_init
@dataclass(frozen=True)
class Restored:
    """The results a resumed pass starts from, and the keys it must record again: those
    it seeds (an awaited payload, a task's result) and, for a suspension written by
    release 0.1 (every result on the event), all of them, so that they reach the
    run_results projection the next resume reads."""

    results: dict[str, Any]
    awaited_refs: dict[str, str | None]
    written: list[str]


def restore_results(
    store: Store,
    tenant_id: str,
    run_id: str,
    suspension: SuspensionFact,
    matched: str | None,
    work: RunState | None = None,
    stored: StoredResults | None = None,
    awaited: dict[str, InboxEvent | None] | None = None,
) -> Restored | None:
    """The results at a suspension plus what the resume seeds: the matched event's
    payload under a wait_for_event's result key (a callback's payload under a
    wait_for_callback's), the results of the task(s) or child runs the suspension
    waited for (`work`: the run's state with their outcomes; None for a redrive, which
    runs them again; `stored`: the run's results if already read; `awaited`: inbox rows
    already read, by event id). None when an awaited payload is gone."""
    seeded: list[str] = []
    if suspension.full_results:
        results = dict(suspension.results or {})
        refs = dict(suspension.awaited_refs or {})
        for key, event_id in refs.items():
            payload = _awaited_payload(store, tenant_id, event_id, awaited)
            if payload is _GONE:
                return None
            results[key] = payload
        seeded = list(results)
    else:
        if stored is None:
            stored = store.results.of_run(tenant_id, run_id)
        if stored.missing:
            return None
        results, refs = stored.values, stored.awaited_refs
    if isinstance(suspension, (StepWaitingForEvent, StepWaitingForCallback)):
        key = suspension.result_key
        payload = _awaited_payload(store, tenant_id, matched, awaited)
        if payload is _GONE:
            return None
        results[key], refs[key] = payload, matched
        seeded.append(key)
    elif work is not None:
        seeded += _seed_work(store, results, refs, suspension, work)
    return Restored(results, refs, list(dict.fromkeys(seeded)))


_GONE = object()
# Suspensions that wait for work done elsewhere (a worker, child runs), not for time.
WORK_SUSPENSIONS = (TaskScheduled, TasksScheduled, ChildrenWaiting)


def _task_value(outcome: TaskOutcome) -> Any:
    """What a task's key holds: its result, or its caught failure."""
    if isinstance(outcome, TaskCompleted):
        return outcome.result
    return {"failed": True, "error": outcome.error_class, "attempts": outcome.attempts}


def _seed_work(
    store: Store,
    results: dict[str, Any],
    refs: dict[str, str | None],
    suspension: SuspensionFact,
    work: RunState,
) -> list[str]:
    """Seed the outcomes of the work a suspension waited for; the keys seeded."""
    seeded: list[str] = []

    def put(key: str, value: Any) -> None:
        refs.pop(key, None)
        results[key] = value
        seeded.append(key)

    outcomes = work.task_outcomes
    if isinstance(suspension, TaskScheduled):
        outcome = outcomes.get(suspension.task_id)
        if outcome is not None and (isinstance(outcome, TaskCompleted) or suspension.catch):
            put(suspension.task_key, _task_value(outcome))
    elif isinstance(suspension, TasksScheduled):
        for task in suspension.tasks:
            outcome = outcomes.get(task.task_id)
            if outcome is not None and (isinstance(outcome, TaskCompleted) or task.catch):
                put(task.task_key, _task_value(outcome))
        if suspension.result_key and suspension.completion is not None:
            put(suspension.result_key, parallel_batch(suspension, work, results))
        elif suspension.result_key:
            put(suspension.result_key, [results.get(key) for key in suspension.keys])
    elif isinstance(suspension, ChildrenWaiting) and suspension.result_key:
        children = store.children.outcomes(work.tenant_id, suspension.join_id)
        if suspension.completion is not None:
            put(suspension.result_key, map_batch(suspension, work, children))
            return seeded
        values = [
            c.result
            if c.status == "completed"
            else {"failed": True, "reason": c.reason or c.status, "runId": c.child_run_id}
            for c in children
        ]
        put(suspension.result_key, values[0] if suspension.join_kind == "call" else values)
    return seeded


def work_failure(
    suspension: SuspensionFact, work: RunState
) -> TaskFailedError | ChildFailedError | ToleranceExceededError | None:
    """The failure a resume re-raises at the step: a task that failed for good, or a
    child that failed, where the workflow does not catch it; with a completion policy,
    a tolerance exceeded (see batches.py)."""
    outcomes = work.task_outcomes
    if isinstance(suspension, (TasksScheduled, ChildrenWaiting)) and suspension.completion:
        return tolerance_failure(suspension, work)
    if isinstance(suspension, TaskScheduled):
        outcome = outcomes.get(suspension.task_id)
        if outcome is not None and not isinstance(outcome, TaskCompleted) and not suspension.catch:
            return TaskFailedError(outcome.error_class, suspension.task_key, outcome.reason)
    elif isinstance(suspension, TasksScheduled):
        for task in suspension.tasks:
            outcome = outcomes.get(task.task_id)
            if outcome is not None and not isinstance(outcome, TaskCompleted) and not task.catch:
                return TaskFailedError(outcome.error_class, task.task_key, outcome.reason)
    elif isinstance(suspension, ChildrenWaiting) and not suspension.catch:
        settled = work.children_settled
        if settled is not None and settled.failed:
            family = family_base(suspension.child_workflow)  # a parallel's branches
            return ChildFailedError(family or suspension.child_workflow, settled.reason or "failed")
    return None


def _awaited_payload(
    store: Store,
    tenant_id: str,
    event_id: str | None,
    awaited: dict[str, InboxEvent | None] | None = None,
) -> Any:
    if event_id is None:
        return None
    if awaited is not None and event_id in awaited:
        row = awaited[event_id]
    else:
        row = store.inbox.get(tenant_id, event_id)
    # A callback's answer may be null: only its erasure makes it gone.
    if row is None or row.erased_at is not None:
        return _GONE
    if row.detail is None and row.type != CALLBACK_EVENT_TYPE:
        return _GONE
    return row.detail


# --- continuing a run ---------------------------------------------------------------------


@fast_init
@dataclass(frozen=True)
class Redo:
    """What a redrive's pass reads at the suspension it re-enters: the run as the failed
    pass found it (`work`: its recorded task outcomes, children's end; None: nothing to
    seed), where it goes on after a work step that ended well (`resumed_task`), and what
    it keeps of a work step it runs again (`reentry`)."""

    work: RunState | None
    resumed_task: ResumedTask | None = None
    reentry: Reentry | None = None


def continue_run(
    store: Store,
    run: LoadedRun,
    definition: WorkflowDefinition,
    suspension: SuspensionFact,
    matched: str | None,
    version: int,
    now: datetime,
    dispatch_seed: str | None = None,
    with_work: bool = False,
    writes: PassWrites | None = None,
    redo: Redo | None = None,
) -> RunOutcome:
    """Re-enter the step tree at a claimed suspension and persist the pass.

    `version` is the stream version this pass holds (its claim). `dispatch_seed`
    (default: derived from `version`) lets a redrive repeat a failed pass with that
    pass's seed, so dispatches it already requested keep their ids. `with_work`: seed
    the recorded outcomes of the task(s) or children the run waited at and go on after
    them (a resume). `redo`: what a redrive reads instead (see Redo). `writes`: see
    persist_pass.
    """
    state = run.state
    tenant_id, run_id = state.tenant_id, state.run_id
    step_index = suspension.step_index

    def fail(reason: str, error: str) -> RunOutcome:
        fail_run(store, state, version, step_index, reason, error, now)
        return RunOutcome(
            tenant_id, run_id, state.workflow_name, "failed", step_index, reason=reason
        )

    flow = definition.flow
    trigger = trigger_event(store, run, flow is not None and flow.debounce is not None)
    batch = batch_events(store, state, flow is not None and flow.batch is not None)
    if trigger is None or batch is None:
        return fail(
            "trigger_event_unavailable", f"the trigger event of run {run_id} is no longer stored"
        )
    work = redo.work if redo is not None else (state if with_work else None)
    restored = restore_results(
        store, tenant_id, run_id, suspension, matched, work, run.results, run.awaited
    )
    if restored is None:
        return fail(
            "awaited_event_unavailable", f"an awaited event of run {run_id} is no longer stored"
        )
    consumed = [matched] if matched is not None else []
    if isinstance(suspension, StepWaitingForEvent) and suspension.consumed_event_ids:
        consumed += suspension.consumed_event_ids  # a 0.1 suspension listed them itself
    path = suspension.entry_path
    try:
        step_at(definition.steps, path)
    except WorkflowStepError:
        store.results.consume(tenant_id, run_id, consumed)
        return fail(
            "workflow_definition_changed",
            f"run {run_id} is suspended at a step its definition does not have",
        )
    resumed_task = redo.resumed_task if redo is not None else None
    if redo is None and work is not None and isinstance(suspension, WORK_SUSPENSIONS):
        resumed_task = ResumedTask(path, work_failure(suspension, work))
    # The answer the callback wait got (a redrive: what its entry got).
    answered = redo.work if redo is not None else state
    close_unanswered_await(store, tenant_id, suspension, matched is not None, now)
    condition = None
    if isinstance(suspension, StepWaitingForCondition):
        # The next check starts from the last checkpoint (a redrive's too).
        condition = ResumedCondition(
            path, suspension.attempts, suspension.condition_state, suspension.first_check_at
        )
    assert state.started_at is not None
    result = Interpreter(
        definition,
        trigger,
        run_id,
        now,
        results=restored.results,
        awaited_refs=restored.awaited_refs,
        dispatch_seed=dispatch_seed or f"{tenant_id}|{version + 1}",
        task_seed=f"{tenant_id}|{version + 1}",
        run_started_at=state.started_at,
        written=restored.written,
        resumed_task=resumed_task,
        reentry=redo.reentry if redo is not None else None,
        resumed_condition=condition,
        callback_secret=state.started.callback_secret if state.started else None,
        parent_run_id=state.started.parent_run_id if state.started else None,
        map_index=state.started.map_index if state.started else None,
        known_callbacks=lambda: known_callbacks(store, tenant_id, run_id),
        callback_error=answered.callback_error if answered is not None else None,
        batch_events=batch,
    ).run(None if isinstance(suspension, FlowHeld) else path)  # held: not started yet
    # The events it took go out with the pass's writes (one statement for the batch).
    return persist_pass(
        store,
        tenant_id,
        run_id,
        definition,
        state.trigger_event_type,
        version,
        result,
        now,
        writes,
        consumed,
    )
