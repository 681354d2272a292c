"""Redrive: re-run a failed run from the step that failed, on the current definition.

A run's stream keeps the results of every step up to its last suspension, but not
those a failed pass computed before it failed. So a redrive repeats the failed pass
from where that pass entered the step tree (the suspension it resumed, or the start
of the run) with the failed pass's own dispatch seed: every mail or webhook the
failed pass already requested gets the same request id again and is not delivered
twice (the outbox keeps one request per id), steps before the failed one see the
same results, and the failed step runs again. A retry that ran out of attempts gets
a fresh budget (its attempt counter restarts at 1), as a Step Functions redrive does.

The redrive is recorded on the run stream as `workflow.run-redriven`
{fromStepIndex, path, definitionFingerprint, previousFingerprint, ...} followed by
the pass's outcome, in one transaction.

Refused (nothing written): a run that is not failed; a run that ended with a returned
failure (`{"isSuccess": False}` is a business outcome, not an error); a run that
failed before its first step (its trigger filter or idempotency key raised: the run
never had a step to go back to); a run whose workflow is no longer registered, whose
re-entry point does not exist in the current definition, or whose trigger or awaited
event has been erased.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..definition import WorkflowRegistry, default_registry
from ..errors import RunNotFound, UnknownWorkflow, WorkflowRunnerError
from ..interpreter import Interpreter
from ..pass_result import Reentry, ResumedTask, WorkflowStepError
from ..step_paths import step_at
from ..store import ChildOutcome, Store, StoredEvent
from ..stream import (
    RETURNED_FAILURE,
    RUN_STREAM,
    ChildrenWaiting,
    Frame,
    Path,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunMigrated,
    RunRedriven,
    RunState,
    StepResumed,
    StepWaitingForCallback,
    SuspensionFact,
    TaskCompleted,
    TasksScheduled,
)
from .ingest import IDEMPOTENCY_KEY_FAILED, TRIGGER_FILTER_FAILED
from .joins import UNKNOWN_WORKFLOW, ended_by_parent
from .passes import (
    WORK_SUSPENSIONS,
    LoadedRun,
    Redo,
    continue_run,
    load_run_for_pass,
    restore_results,
    trigger_event,
    work_failure,
)
from .persist import persist_pass

# Failures that happened before the run had a step: nothing to go back to.
_BEFORE_FIRST_STEP = frozenset({TRIGGER_FILTER_FAILED, IDEMPOTENCY_KEY_FAILED})


class RedriveRefused(WorkflowRunnerError):
    """The run cannot be redriven; the message says why and what to do instead."""


@dataclass(frozen=True)
class RedriveResult:
    """Where the redriven pass left the run."""

    tenant_id: str
    run_id: str
    workflow_name: str
    outcome: Literal["suspended", "completed", "failed"]
    from_step_index: int
    path: Path
    definition_fingerprint: str
    previous_fingerprint: str
    step_index: int | None = None
    wake_at: datetime | None = None
    reason: str | None = None


@dataclass(frozen=True)
class _PassEntry:
    """Where the failed pass entered the step tree, with which dispatch seed, and what
    the run had received there (`work`: the run as the pass found it, its suspension
    open with the awaited event, callback answer, task outcomes or children's end
    recorded for it)."""

    suspension: SuspensionFact | None  # None: the pass started the run
    suspension_version: int | None
    work: RunState | None
    dispatch_seed: str
    path: Path

    @property
    def matched(self) -> str | None:
        """The awaited event or callback answer the suspension received."""
        return self.work.matched_event_id if self.work is not None else None


# What ends a suspension's time of receiving (a pass claimed it, or the run ended).
_PASS_BOUNDARIES = (StepResumed, RunRedriven, RunCompleted, RunFailed, RunCancelled)


def _work_at(run_id: str, tenant_id: str, events: list[StoredEvent], version: int) -> RunState:
    """The run as it stood when the suspension at `version` was claimed or the run ended
    there: the fold up to that suspension and what was recorded for it after."""
    state = RunState(run_id=run_id, tenant_id=tenant_id)
    for e in events:
        if e.version > version and isinstance(e.fact, _PASS_BOUNDARIES):
            break
        state.apply(e.recorded)
    return state


def _find_failed_pass(run_id: str, tenant_id: str, events: list[StoredEvent]) -> _PassEntry:
    """Locate the entry of the pass that ended in the run's last `run-failed` (or, for a
    child its parent's end cancelled, the suspension it was cancelled at)."""
    entry = _PassEntry(None, None, None, f"{tenant_id}|1", [])
    open_: tuple[SuspensionFact, int] | None = None  # the suspension and its version
    suspensions = {e.version: e.fact for e in events if isinstance(e.fact, SuspensionFact)}

    def at(suspension: SuspensionFact, version: int, seed: str, path: Path) -> _PassEntry:
        return _PassEntry(
            suspension, version, _work_at(run_id, tenant_id, events, version), seed, path
        )

    for e in events:
        fact = e.fact
        if e.version in suspensions:
            open_ = (suspensions[e.version], e.version)
        elif isinstance(fact, RunMigrated) and fact.suspension_version in suspensions:
            # An operator moved the suspension: it is re-entered where it was moved to.
            moved = fact.moved(suspensions[fact.suspension_version])
            suspensions[fact.suspension_version] = moved
            if open_ is not None and open_[1] == fact.suspension_version:
                open_ = (moved, open_[1])
        elif isinstance(fact, StepResumed) and open_ is not None:
            entry = at(*open_, f"{tenant_id}|{e.version + 1}", open_[0].entry_path)
            open_ = None
        elif isinstance(fact, RunRedriven):
            # A redrive that failed again is redriven with the same entry and seed.
            version = fact.suspension_version or 0
            entered = suspensions.get(version)
            entry = (
                at(entered, version, fact.dispatch_seed, list(fact.path))
                if entered is not None
                else _PassEntry(None, None, None, fact.dispatch_seed, list(fact.path))
            )
            open_ = None
        elif isinstance(fact, (RunFailed, RunCancelled)) and open_ is not None:
            # Ended while still suspended (its definition changed before the claim, its
            # parent's end cancelled it): the redrive resumes that suspension; a fresh
            # seed, as nothing was dispatched.
            entry = at(*open_, f"{tenant_id}|{events[-1].version + 2}", open_[0].entry_path)
            open_ = None
    return entry


def _fresh_retry_budget(path: Path, failed_path: Path) -> None:
    """Restart the attempt counter of every retry the failure happened inside (in place).

    The entry path of the failed pass can carry a retry frame anywhere, not only at its
    end: a pass that resumed a wait inside a retry enters at `[{i, attempt}, {i}]`.
    A run only fails when every retry around the failing step ran out of attempts, so
    each of them gets its counter back to 1.
    """

    def frame(f: Frame) -> Frame:
        return {k: v for k, v in f.items() if k != "attempt"}

    for depth, entered in enumerate(path):
        if "attempt" not in entered:
            continue
        around = [frame(f) for f in path[: depth + 1]]
        if [frame(f) for f in failed_path[: depth + 1]] == around:
            path[depth] = {**entered, "attempt": 1}


def redrive_refusal(run_id: str, state: RunState, revive: bool = False) -> str | None:
    """Why a run cannot be redriven (None: it can). `revive`: a child its parent's end
    (or its map's stop) cancelled may be redriven too (its parent's redrive asks for it)."""
    if revive and state.status == "cancelled" and ended_by_parent(state.cancel_reason):
        return None
    if state.status != "failed":
        return f"run {run_id} is {state.status}; only failed runs can be redriven"
    failure = state.last_failure
    reason = failure.reason if failure else None
    if reason == RETURNED_FAILURE:
        return (
            f"run {run_id} ended with a returned failure (the workflow returned "
            "isSuccess: false), a business outcome rather than an error; start a new run"
        )
    if reason is not None and reason.partition(":")[0] in _BEFORE_FIRST_STEP:
        return (
            f"run {run_id} failed before its first step ({reason}): fix the workflow's "
            "trigger filter or idempotency key and send the domain event again with a new id"
        )
    return None


def redrive_run(
    store: Store,
    tenant_id: str,
    run_id: str,
    now: datetime,
    registry: WorkflowRegistry | None = None,
    revive: bool = False,
) -> RedriveResult:
    """Re-run a failed run from the step that failed, on the current registered definition.

    One transaction: append `workflow.run-redriven`, repeat the failed pass, append its
    outcome (suspended, completed or failed again). Nothing recorded happens twice: the
    pass reads the awaited event or callback answer its entry received, the results of
    the tasks and children that ended well there, and dispatches and children the failed
    pass asked for keep their ids; only what failed runs again (a failed task under a new
    id; a failed map or call reopens its join: children that completed keep their
    results, failed ones are redriven, those its failure cancelled or never started
    start again). `revive`: the worker reviving a child its parent's end cancelled.

    Raises:
        RunNotFound: the tenant has no such run.
        RedriveRefused: the run cannot be redriven (the message says why); nothing written.
    """
    registry = registry or default_registry()
    with store.transaction():
        # The summary lock first: the purge skips locked runs, and a purge that got here
        # first has deleted the run by the time the lock is granted (RunNotFound).
        if not store.runs.lock(tenant_id, run_id):
            raise RunNotFound(tenant_id, run_id)
        run = load_run_for_pass(store, tenant_id, run_id)
        state = run.state
        refusal = redrive_refusal(run_id, state, revive)
        if refusal is not None:
            raise RedriveRefused(refusal)
        failure = state.last_failure if state.status == "failed" else None
        try:
            definition = registry.latest(state.workflow_name)
        except UnknownWorkflow as error:
            raise RedriveRefused(
                f"run {run_id}: workflow {state.workflow_name!r} is not registered; "
                "check WORKFLOW_MODULES"
            ) from error
        entry = _find_failed_pass(run_id, tenant_id, run.events)
        path = copy.deepcopy(entry.path)
        _fresh_retry_budget(path, list((failure.path if failure else None) or []))
        if path:
            try:
                step_at(definition.steps, path)
            except WorkflowStepError as error:
                raise RedriveRefused(
                    f"run {run_id} would re-enter at {path}, which the current definition "
                    f"of {definition.name!r} (version {definition.version}) does not have"
                ) from error
        trigger = trigger_event(store, run)
        if trigger is None:
            raise RedriveRefused(f"the trigger event of run {run_id} is no longer stored")
        suspension: SuspensionFact | None = None
        redo: Redo | None = None
        if entry.suspension is not None:
            suspension = dataclasses.replace(entry.suspension, path=path)
            redo = _redo(store, tenant_id, run_id, suspension, entry.work)
            if restore_results(store, tenant_id, run_id, suspension, entry.matched) is None:
                raise RedriveRefused(f"an awaited event of run {run_id} is no longer stored")
        from_step = failure.step_index if failure else (path[0]["i"] if path else 0)
        redriven = RunRedriven(
            from_step_index=from_step,
            path=path,
            definition_fingerprint=definition.fingerprint,
            previous_fingerprint=state.fingerprint,
            definition_version=definition.version,
            suspension_version=entry.suspension_version,
            awaited_event_id=entry.matched,
            dispatch_seed=entry.dispatch_seed,
        )
        if not store.streams.append(tenant_id, run_id, RUN_STREAM, state.version, [redriven], now):
            raise RedriveRefused(f"run {run_id} changed while being redriven; try again")
        version = state.version + 1
        started = state.started
        if suspension is None:
            assert state.started_at is not None
            result = Interpreter(
                definition,
                trigger,
                run_id,
                now,
                dispatch_seed=entry.dispatch_seed,
                task_seed=f"{tenant_id}|{version + 1}",
                run_started_at=state.started_at,
                callback_secret=started.callback_secret if started else None,
                parent_run_id=started.parent_run_id if started else None,
                map_index=started.map_index if started else None,
            ).run()
            outcome = persist_pass(
                store, tenant_id, run_id, definition, state.trigger_event_type, version, result, now
            )
        else:
            entered = LoadedRun(
                dataclasses.replace(state, fingerprint=definition.fingerprint),
                run.events,
                run.trigger_row,
            )
            outcome = continue_run(
                store,
                entered,
                definition,
                suspension,
                entry.matched,
                version,
                now,
                dispatch_seed=entry.dispatch_seed,
                redo=redo,
            )
            if redo is not None and redo.reentry is not None and redo.reentry.join_id:
                _reopen(store, tenant_id, run_id, redo.reentry.join_id, now)
        return RedriveResult(
            tenant_id=tenant_id,
            run_id=run_id,
            workflow_name=definition.name,
            outcome=outcome.outcome,
            from_step_index=from_step,
            path=path,
            definition_fingerprint=definition.fingerprint,
            previous_fingerprint=state.fingerprint,
            step_index=outcome.step_index,
            wake_at=outcome.wake_at,
            reason=outcome.reason,
        )


def _redo(
    store: Store,
    tenant_id: str,
    run_id: str,
    suspension: SuspensionFact,
    work: RunState | None,
) -> Redo | None:
    """What the redrive reads at the suspension it re-enters (None: not a work step).

    Work that ended well there is read back and the pass goes on after it; work that
    failed runs again, keeping what ended well: a parallel's completed tasks, a join's
    children (see _reopen).

    Raises:
        RedriveRefused: a child of a failed join cannot run again (the message says which
            and why); nothing written.
    """
    if work is not None and isinstance(suspension, StepWaitingForCallback):
        return Redo(work)  # the answer its entry got (a failure fails it again, uncaught)
    if work is None or not isinstance(suspension, WORK_SUSPENSIONS):
        return None
    path = suspension.entry_path
    if work_failure(suspension, work) is None and work.outcome_ready:
        return Redo(work, ResumedTask(path, None))
    if isinstance(suspension, ChildrenWaiting):
        _check_revivable(store, tenant_id, run_id, suspension)
        return Redo(None, None, Reentry(path, join_id=suspension.join_id))
    if isinstance(suspension, TasksScheduled):
        kept = frozenset(
            t.task_key
            for t in suspension.tasks
            if isinstance(work.task_outcomes.get(t.task_id), TaskCompleted)
            # A caught failure is kept too, but not under a completion policy: the kept
            # tasks count as succeeded when the policy decides again.
            or (t.catch and t.task_id in work.task_outcomes and suspension.completion is None)
        )
        return Redo(work, None, Reentry(path, kept_tasks=kept))
    return Redo(work)  # a single task that failed: it runs again, under a new id


def _check_revivable(
    store: Store, tenant_id: str, run_id: str, suspension: ChildrenWaiting
) -> None:
    """Every child of the join that did not complete can run again: a failed one can be
    redriven, a cancelled one was cancelled by its parent's end (not by an operator)."""
    for child in store.children.outcomes(tenant_id, suspension.join_id):
        if child.status not in ("failed", "cancelled") or _never_started(child):
            continue
        loaded = load_run_for_pass(store, tenant_id, child.child_run_id)
        refusal = redrive_refusal(child.child_run_id, loaded.state, revive=True)
        if refusal is not None:
            raise RedriveRefused(
                f"run {run_id} failed at step {suspension.step_index} "
                f"({suspension.join_kind} of {suspension.child_workflow!r}), whose child "
                f"{child.item_index} cannot run again: {refusal}"
            )


def _never_started(child: ChildOutcome) -> bool:
    """A child its join cancelled before it started, or whose workflow was unknown: it
    has no run (it starts when its join is reopened)."""
    return child.reason == UNKNOWN_WORKFLOW or not child.started


def _reopen(store: Store, tenant_id: str, run_id: str, join_id: str, now: datetime) -> None:
    """Reopen the join the redriven pass suspended at again: its children that did not
    complete start again (revived by the worker: a failed or cancelled run is redriven,
    one that never started starts), those that completed stay counted.

    Raises:
        RedriveRefused: the step now asks for other children than the join has (its
            items changed); nothing written.
    """
    state = load_run_for_pass(store, tenant_id, run_id, tail=True).state
    waiting = state.suspension
    if not isinstance(waiting, ChildrenWaiting) or waiting.join_id != join_id:
        return
    total = store.children.reopen(tenant_id, join_id, state.suspension_version, now)
    if total != waiting.children:
        raise RedriveRefused(
            f"run {run_id}: step {waiting.step_index} now asks for {waiting.children} "
            f"children where the run had {total}: its items changed since it failed; "
            "start a new run"
        )
