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
from ..pass_result import WorkflowStepError
from ..step_paths import step_at
from ..store import Store, StoredEvent
from ..stream import (
    RETURNED_FAILURE,
    RUN_STREAM,
    Frame,
    Path,
    RunFailed,
    RunRedriven,
    StepEventMatched,
    StepResumed,
    SuspensionFact,
)
from .passes import (
    LoadedRun,
    continue_run,
    load_run_for_pass,
    restore_results,
    trigger_event,
)
from .persist import persist_pass

# Failures that happened before the run had a step: nothing to go back to.
_BEFORE_FIRST_STEP = frozenset({"trigger_filter_failed", "idempotency_key_failed"})


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
    """Where the failed pass entered the step tree, and with which dispatch seed."""

    suspension: SuspensionFact | None  # None: the pass started the run
    suspension_version: int | None
    matched: str | None
    dispatch_seed: str
    path: Path


def _find_failed_pass(tenant_id: str, events: list[StoredEvent]) -> _PassEntry:
    """Locate the entry of the pass that ended in the run's last `run-failed`."""
    entry = _PassEntry(None, None, None, f"{tenant_id}|1", [])
    open_: tuple[SuspensionFact, int] | None = None  # the suspension and its version
    matched: str | None = None
    suspensions = {e.version: e.fact for e in events if isinstance(e.fact, SuspensionFact)}
    for e in events:
        fact = e.fact
        if e.version in suspensions:
            open_, matched = (suspensions[e.version], e.version), None
        elif isinstance(fact, StepEventMatched) and matched is None:
            matched = fact.event_id
        elif isinstance(fact, StepResumed) and open_ is not None:
            entry = _PassEntry(
                open_[0],
                open_[1],
                fact.awaited_event_id,
                f"{tenant_id}|{e.version + 1}",
                open_[0].entry_path,
            )
            open_ = None
        elif isinstance(fact, RunRedriven):
            # A redrive that failed again is redriven with the same entry and seed.
            version = fact.suspension_version or 0
            entered = suspensions.get(version)
            entry = _PassEntry(
                entered,
                version if entered is not None else None,
                fact.awaited_event_id,
                fact.dispatch_seed,
                list(fact.path),
            )
            open_ = None
        elif isinstance(fact, RunFailed) and open_ is not None:
            # Failed while still suspended (e.g. its definition changed before the claim):
            # the redrive resumes that suspension; a fresh seed, as nothing was dispatched.
            entry = _PassEntry(
                open_[0],
                open_[1],
                matched,
                f"{tenant_id}|{events[-1].version + 2}",
                open_[0].entry_path,
            )
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


def redrive_run(
    store: Store,
    tenant_id: str,
    run_id: str,
    now: datetime,
    registry: WorkflowRegistry | None = None,
) -> RedriveResult:
    """Re-run a failed run from the step that failed, on the current registered definition.

    One transaction: append `workflow.run-redriven`, repeat the failed pass, append its
    outcome (suspended, completed or failed again).

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
        if state.status != "failed":
            raise RedriveRefused(
                f"run {run_id} is {state.status}; only failed runs can be redriven"
            )
        failure = state.last_failure
        reason = failure.reason if failure else None
        if reason == RETURNED_FAILURE:
            raise RedriveRefused(
                f"run {run_id} ended with a returned failure (the workflow returned "
                "isSuccess: false), a business outcome rather than an error; start a new run"
            )
        if reason in _BEFORE_FIRST_STEP:
            raise RedriveRefused(
                f"run {run_id} failed before its first step ({reason}): fix the workflow's "
                "trigger filter or idempotency key and send the domain event again with a new id"
            )
        try:
            definition = registry.latest(state.workflow_name)
        except UnknownWorkflow as error:
            raise RedriveRefused(
                f"run {run_id}: workflow {state.workflow_name!r} is not registered; "
                "check WORKFLOW_MODULES"
            ) from error
        entry = _find_failed_pass(tenant_id, run.events)
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
        if entry.suspension is not None:
            suspension = dataclasses.replace(entry.suspension, path=path)
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
                callback_secret=state.started.callback_secret if state.started else None,
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
            )
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
