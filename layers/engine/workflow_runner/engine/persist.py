"""Writing a pass: the one event that says where the run stands, the results the pass
set, its dispatch requests and tasks, and the run summary — in the caller's
transaction, after the stream version the pass holds (its claim or its start)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from ..definition import WorkflowDefinition
from ..errors import StoreError
from ..fast_init import fast_init
from ..pass_result import PassResult, Suspension, TaskWait
from ..redaction import detail_for_log
from ..store import NewTask, PassWrite, RunEnd, RunSummaryWrite, Store
from ..stream import (
    DISPATCH_STREAM,
    RETURNED_FAILURE,
    RUN_STREAM,
    ChildrenRequested,
    ChildrenWaiting,
    DispatchRequested,
    Fact,
    ParallelTask,
    RetryScheduled,
    RunCompleted,
    RunFailed,
    RunState,
    RunStatus,
    StepWaiting,
    StepWaitingForCallback,
    StepWaitingForCondition,
    StepWaitingForEvent,
    TaskScheduled,
    TasksScheduled,
)
from .callback_passes import callback_writes
from .joins import close_joins, record_join, run_settled
from .pinning import ensure_registered

log = logging.getLogger("workflow_runner")


@fast_init
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
    task_id: str | None = None  # the task the run now waits for


SuspensionEvent = (
    StepWaiting
    | StepWaitingForEvent
    | RetryScheduled
    | TaskScheduled
    | TasksScheduled
    | ChildrenWaiting
    | StepWaitingForCallback
    | StepWaitingForCondition
)


def suspension_fact(suspension: Suspension, common: dict[str, Any]) -> SuspensionEvent:
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
    if suspension.kind == "task-scheduled":
        task = suspension.task
        assert task is not None
        return TaskScheduled(
            **common,
            task_key=task.task_key,
            task_id=task.task_id,
            step_kind=task.step_kind,
            max_attempts=task.max_attempts,
            timeout_ms=task.timeout_ms,
            catch=task.catch,
        )
    if suspension.kind == "waiting-for-callback":
        callback = suspension.callback
        assert callback is not None
        return StepWaitingForCallback(
            **common,
            result_key=callback.result_key,
            token_hash=callback.token_hash,
            timeout_at=suspension.wake_at,
            name=callback.name,
            heartbeat_seconds=callback.heartbeat_seconds,
            heartbeat_at=callback.heartbeat_at,
        )
    if suspension.kind == "waiting-for-condition":
        condition = suspension.condition
        assert condition is not None
        return StepWaitingForCondition(
            **common,
            key=condition.key,
            attempts=condition.attempts,
            condition_state=condition.state,
            wake_at=suspension.wake_at,
            first_check_at=condition.first_check_at,
            max_attempts=condition.max_attempts,
            timeout_at=condition.deadline,
        )
    if suspension.kind == "tasks-scheduled":
        return TasksScheduled(
            **common,
            tasks=tuple(
                ParallelTask(
                    task_key=t.task_key,
                    task_id=t.task_id,
                    step_kind=t.step_kind,
                    max_attempts=t.max_attempts,
                    timeout_ms=t.timeout_ms,
                    catch=t.catch,
                )
                for t in suspension.tasks
            ),
            result_key=suspension.result_key,
            result_keys=suspension.result_keys,
            completion=suspension.completion,
            catch=suspension.catch,
        )
    if suspension.kind == "children-waiting":
        join = suspension.join
        assert join is not None
        return ChildrenWaiting(
            **common,
            join_id=join.join_id,
            join_kind=join.kind,
            child_workflow=join.workflow,
            children=len(join.children),
            concurrency=join.concurrency,
            result_key=join.result_key,
            catch=join.catch,
            child_run_id=join.children[0].run_id if join.kind == "call" else None,
            completion=join.completion,
        )
    return StepWaiting(**common, wake_at=suspension.wake_at)


def _new_task(
    tenant_id: str, run_id: str, definition: WorkflowDefinition, spec: TaskWait, path: Any
) -> NewTask:
    return NewTask(
        tenant_id=tenant_id,
        task_id=spec.task_id,
        run_id=run_id,
        workflow_name=definition.name,
        definition_fingerprint=definition.fingerprint,
        task_key=spec.task_key,
        step_kind=spec.step_kind,
        path=path,
        scope=spec.scope,
        request=spec.request,
        max_attempts=spec.max_attempts,
        timeout_ms=spec.timeout_ms,
        limits=spec.limits,
    )


class PassWrites:
    """The writes of a batch of passes (each of another run, all at one instant) to
    their runs, sent together: `flush` sends one statement (inside the batch's pipeline
    it rides the pipeline's round trip), `finish`, after the pipeline, cancels the
    children of the joins the passes that ended their runs closed.

    A resume batch that ran its passes before claiming (see resume._resume_all) hands
    each claim to `claim`: it goes out in the same statement, first among its run's
    events, so a claim that lost makes the statement, and the batch, fail."""

    def __init__(self) -> None:
        self._writes: list[PassWrite] = []
        self._now: datetime | None = None
        self._sent: list[tuple[datetime, Callable[[], list[tuple[str, str, str]]]]] = []
        self._claims: dict[tuple[str, str], tuple[int, Fact]] = {}

    def add(self, write: PassWrite, now: datetime) -> None:
        if self._now is not None and now != self._now:
            raise ValueError("the passes of one batch are written at one instant")
        self._now = now
        self._writes.append(write)

    def writes_to(self, runs: Iterable[tuple[str, str]]) -> bool:
        """Every one of these (tenant, run) has a pass write held here."""
        held = {(w.tenant_id, w.run_id) for w in self._writes}
        return all(run in held for run in runs)

    def claim(self, tenant_id: str, run_id: str, version: int, fact: Fact) -> None:
        """Write `fact` at `version` + 1 of the run, before the events of its pass (which
        was written to hold version + 1); the run's pass must be held here."""
        self._claims[(tenant_id, run_id)] = (version, fact)

    def flush(self, store: Store) -> None:
        if self._writes and self._now is not None:
            writes = [self._with_claim(w) for w in self._writes] if self._claims else self._writes
            if self._claims:
                raise StoreError(f"claims without their pass: {sorted(self._claims)}")
            self._sent.append((self._now, store.streams.record_passes(writes, self._now)))
        self._writes, self._now = [], None

    def _with_claim(self, write: PassWrite) -> PassWrite:
        claim = self._claims.pop((write.tenant_id, write.run_id), None)
        if claim is None:
            return write
        version, fact = claim
        if write.version != version + 1:
            raise StoreError(f"pass of run {write.run_id} does not follow its claim")
        return replace(write, version=version, events=[fact, *write.events])

    def finish(self, store: Store) -> None:
        self.flush(store)
        sent, self._sent = self._sent, []
        for now, closed in sent:
            close_joins(store, closed(), now)


def persist_pass(
    store: Store,
    tenant_id: str,
    run_id: str,
    definition: WorkflowDefinition,
    trigger_event_type: str,
    version: int,
    result: PassResult,
    now: datetime,
    writes: PassWrites | None = None,
    consumed: Sequence[str] = (),
) -> RunOutcome:
    """Append a pass's outcome after stream version `version` (held by this pass).

    The outcome event carries only the results this pass wrote (each result is
    recorded once); run_results keeps every key's current value for the next resume.
    With `writes` (a batch of passes) the pass's writes to its run join the batch's one
    statement instead of going out now. `consumed`: the awaited events the pass took
    (written with its events, run_consumed_events).
    """
    values, refs = result.results_delta(), result.awaited_refs_delta()
    fact: SuspensionEvent | RunCompleted | RunFailed
    status: RunStatus
    callbacks = callback_writes(result, tenant_id, run_id, definition.name)
    tasks: list[NewTask] = []
    # Children started without waiting are recorded before the pass's outcome, which
    # stays the stream's last event (a resume reads from it on).
    started = [
        ChildrenRequested(
            join_id=join.join_id,
            child_workflow=join.workflow,
            child_run_ids=tuple(c.run_id for c in join.children),
            step_index=int(join.path[0]["i"]),
            path=join.path,
        )
        for join in result.starts
    ]
    created = callbacks.facts
    outcome_version = version + len(started) + len(created) + 1
    if result.outcome == "suspended":
        suspension = result.suspension
        assert suspension is not None
        fact = suspension_fact(
            suspension,
            {
                "workflow_name": definition.name,
                "trigger_event_type": trigger_event_type,
                "step_index": suspension.step_index,
                "path": suspension.path,
                "definition_fingerprint": definition.fingerprint,
                "results_delta": values,
                "awaited_refs_delta": refs,
            },
        )
        status = "waiting"
        if suspension.task is not None:
            tasks = [_new_task(tenant_id, run_id, definition, suspension.task, suspension.path)]
        for j, spec in enumerate(suspension.tasks):
            tasks.append(
                _new_task(tenant_id, run_id, definition, spec, [*suspension.path, {"i": j}])
            )
        by_work = bool(tasks) or suspension.join is not None
        outcome = RunOutcome(
            tenant_id,
            run_id,
            definition.name,
            "suspended",
            step_index=fact.step_index,
            wake_at=None if by_work else fact.due_at,
            task_id=suspension.task.task_id if suspension.task else None,
        )
    elif result.outcome == "completed":
        fact = RunCompleted(
            workflow_name=definition.name,
            trigger_event_type=trigger_event_type,
            step_index=len(definition.steps),
            result=result.return_value,
            results_delta=values,
            awaited_refs_delta=refs,
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
            results_delta=values,
            awaited_refs_delta=refs,
        )
        if result.error_detail:
            # The raw text may carry personal data: never stored (invariant 8), and logged
            # only as the redaction policy allows.
            log.warning(
                "workflow step failed",
                extra={
                    "tenant_id": tenant_id,
                    "run_id": run_id,
                    "detail": detail_for_log(result.error_detail),
                },
            )
        status = "failed"
        outcome = RunOutcome(
            tenant_id, run_id, definition.name, "failed", failed_index, reason=result.reason
        )
    # Every write of the pass goes out in one round trip: the claim (or the start)
    # already holds `version`, so none of these appends can lose a race.
    with store.pipeline():
        ensure_registered(store, definition, now)
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
        for task in tasks:
            store.tasks.insert(task, now)
        callbacks.write(
            store,
            fact if isinstance(fact, StepWaitingForCallback) else None,
            outcome_version,
            now,
        )
        pass_write = PassWrite(
            tenant_id,
            run_id,
            version,
            [*started, *created, fact],
            RunSummaryWrite(
                tenant_id,
                run_id,
                definition.name,
                status,
                definition.fingerprint,
                trigger_event_type,
                workflow_version=definition.version,
            ),
            # A failed run keeps the results as of its last suspension: a redrive
            # repeats the failed pass from there.
            (values, refs) if status != "failed" else None,
            # As a child it is counted into its joins, as a parent its joins close.
            None
            if status == "waiting"
            else RunEnd(status, result.return_value, result.reason if status == "failed" else None),
            consumed,
        )
        if writes is None:
            closed = store.streams.record_passes([pass_write], now)
        else:
            writes.add(pass_write, now)
    for join in result.starts:
        record_join(store, tenant_id, run_id, join, None, now)
    if result.suspension is not None and result.suspension.join is not None:
        record_join(store, tenant_id, run_id, result.suspension.join, outcome_version, now)
    if writes is None:
        close_joins(store, closed(), now)
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
    """End a run as failed without a pass (its definition or an input is gone, a pass
    could not be stored).

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
    run_settled(store, state.tenant_id, state.run_id, "failed", None, reason, now)
    return True
