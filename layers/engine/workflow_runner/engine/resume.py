"""Resume: claim a due suspension and run the next pass, in one transaction.

ResumeRun calls `resume_runs` for an SQS batch (one commit for the batch) and
`resume_run` for a direct invoke. The claim is the append of `workflow.step.resumed`
at the stream's next version: of two concurrent resumes of one suspension exactly one
appends it, the other answers `already-resumed` (invariant 2). A run pinned to a
definition that is no longer registered resumes on one whose shape agrees, or on the
kept code that still has its own (engine/pinning.py), or fails loud (invariant 7).
Kept code in another function version answers `on-kept-version`: engine/handing.py
hands such a request to that version, after the batch's transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from ..definition import WorkflowDefinition, WorkflowRegistry, default_registry
from ..definition.hosts import REGISTERED_HOSTS, RESUME_RUN, DefinitionHosts
from ..errors import RunNotFound, StoreError, StreamConflict, TransientStoreError
from ..fast_init import fast_init
from ..flow.passes import admit_passes, pass_work
from ..flow.wake import wake_after_commit
from ..redaction import exception_for_log
from ..store import Store
from ..stream import (
    ChildrenWaiting,
    FlowHeld,
    ResumedBy,
    RetryScheduled,
    StepResumed,
    StepWaiting,
    StepWaitingForCallback,
    StepWaitingForCondition,
    StepWaitingForEvent,
    TaskScheduled,
    TasksScheduled,
)
from .passes import LoadedRun, continue_run, load_runs_for_resume, trigger_event
from .persist import PassWrites, fail_run
from .pinning import serving_definition
from .resume_answers import ResumeRequestItem, ResumeResult, fail_refused_pass

__all__ = ["ResumeRequestItem", "ResumeResult", "resume_run", "resume_runs"]

log = logging.getLogger("workflow_runner")


def _not_registered_error(registry: WorkflowRegistry, name: str, run_id: str, pinned: str) -> str:
    try:
        current: str | None = registry.latest(name).fingerprint
    except Exception:
        current = None
    if current is None:
        return f'Workflow "{name}" is not registered — cannot resume run {run_id}.'
    return (
        f'Workflow "{name}" definition changed since run {run_id} started '
        f"(expected {pinned[:12]}…, current {current[:12]}…)."
    )


def _resume_in_transaction(
    store: Store,
    item: ResumeRequestItem,
    now: datetime,
    registry: WorkflowRegistry,
    hosts: DefinitionHosts | None,
) -> ResumeResult:
    """resume_run's body, inside the caller's transaction. RunNotFound is raised
    before anything is written."""
    (result,) = _resume_all(store, [item], now, registry, hosts)
    if isinstance(result, RunNotFound):
        raise result
    return result


class _Rerun(Exception):
    """A batch whose passes ran before their claims could not be written as it ran:
    its transaction is rolled back and the batch runs again, claiming first."""


def _resume_all(
    store: Store,
    items: Sequence[ResumeRequestItem],
    now: datetime,
    registry: WorkflowRegistry,
    hosts: DefinitionHosts | None,
    claims_last: bool = False,
) -> list[ResumeResult | RunNotFound]:
    """Resume `items` in the caller's transaction in three steps: their runs are read
    together (one round trip), every due suspension is claimed in one statement per
    tenant, and the passes that won their claim run in request order, their writes to
    their runs in one statement sent with their other writes in one pipeline (one round
    trip, plus one for any pass that must read).

    `claims_last` (a queue batch): when every claim's pass reads nothing more (a
    timer's, an event wait's, not one on the outcome of work), the passes run first, as
    if their claims had won, and each claim goes out in its pass's statement, first
    among its run's events: one statement and round trip fewer. A claim that lost then
    makes that statement fail (StreamConflict: the stream moved since it was read), and
    the caller runs the batch again claiming first. A pass that reached the database
    before its claim (a read, a failure written at once) raises _Rerun instead; a pass
    that writes more than its run (a dispatch, a task, a callback) has the claims sent
    ahead of those writes, and _Rerun raised if one lost.

    A run asked for twice is claimed once (the other request answers already-resumed).
    A pass that ends a run cancels that run's children only after every pass of the
    batch is written: a child resumed in the same batch has then moved on or settled,
    and the cancel sees it as it now is."""
    loaded = load_runs_for_resume(store, [(i.tenant_id, i.run_id) for i in items])
    decided: list[ResumeResult | RunNotFound | _Claim] = []
    claimed: set[tuple[str, str]] = set()
    for item, run in zip(items, loaded, strict=True):
        key = (item.tenant_id, item.run_id)
        if isinstance(run, RunNotFound):
            decided.append(run)
        elif key in claimed:
            decided.append(ResumeResult("already-resumed", *key, item.step_index))
        else:
            decision = _decide(store, item, run, now, registry, hosts)
            if isinstance(decision, _Claim):
                claimed.add(key)
            decided.append(decision)
    if any(isinstance(d, _Claim) and d.definition.flow is not None for d in decided):
        decided = _within_limits(store, decided, now)
    claims = [d for d in decided if isinstance(d, _Claim)]
    claims_last = claims_last and bool(claims) and all(map(_reads_nothing_more, claims))
    sent = store.statements_sent
    won = claimed if claims_last else _claim_all(store, claims, now)
    writes = PassWrites()
    results: list[ResumeResult | RunNotFound] = []
    with store.pipeline():
        for done in decided:
            if not isinstance(done, _Claim):
                results.append(done)
            elif (done.base.tenant_id, done.base.run_id) not in won:
                results.append(done.base)
            else:
                results.append(_continue_claimed(store, done, now, writes))
        if claims_last:
            _claim_after_passes(store, claims, writes, sent, now)
        writes.flush(store)
    writes.finish(store)
    return results


def _within_limits(
    store: Store, decided: list[ResumeResult | RunNotFound | _Claim], now: datetime
) -> list[ResumeResult | RunNotFound | _Claim]:
    """The claims whose passes their workflow's concurrency admits now (flow/passes.py);
    one held back answers `not-due` (reason held_by_limit): it waits, queued, until a
    slot that frees wakes it."""
    works = []
    for at, claim in enumerate(decided):
        flow = claim.definition.flow if isinstance(claim, _Claim) else None
        if isinstance(claim, _Claim) and flow is not None:
            event = trigger_event(store, claim.run, flow.debounce is not None)
            base = claim.base
            work = event and pass_work(claim.definition, event, base.run_id, base.step_index, now)
            if work:
                works.append((at, work))
    held = admit_passes(store, [work for _, work in works], now)
    decided = list(decided)
    for n in held:
        at = works[n][0]
        claim = decided[at]
        assert isinstance(claim, _Claim)
        decided[at] = replace(claim.base, outcome="not-due", reason="held_by_limit")
    for claim in decided:
        state = claim.run.state if isinstance(claim, _Claim) else None
        if state is not None and isinstance(state.suspension, FlowHeld) and state.started_at:
            # A run held before its first step starts now (metric LimitWaitSeconds).
            waited = (now - state.started_at).total_seconds()
            store.flow.waits.append((state.workflow_name, waited))
    return decided


def _reads_nothing_more(claim: _Claim) -> bool:
    """A claim whose pass needs nothing beyond what the batch read: a timer's, a
    retry's, a condition's (its state is on its fact), an event wait's or a callback's
    suspension (the inbox row of what matched it came with its stream), not one on the
    outcome of work, of release 0.2 on (a 0.1 suspension's results are read again)."""
    run = claim.run
    suspension = run.state.suspension
    matched = run.state.matched_event_id
    return (
        isinstance(suspension, _READS_NOTHING_MORE)
        and not suspension.full_results
        and (matched is None or matched in (run.awaited or ()))
        and run.results is not None
    )


_READS_NOTHING_MORE = (
    StepWaiting,
    RetryScheduled,
    StepWaitingForCondition,
    StepWaitingForEvent,
    StepWaitingForCallback,
)


def _claim_after_passes(
    store: Store, claims: Sequence[_Claim], writes: PassWrites, sent: int, now: datetime
) -> None:
    """Write the claims of passes that already ran (`sent`: the statement count before
    them): inside their passes' statement when that is all the passes hold back, else in
    a statement of their own ahead of what they hold back. Raises _Rerun (with nothing
    held back left to go out) when a pass reached the database before its claim, or
    when a claim sent on its own lost."""
    if store.statements_sent != sent:
        store.discard_held()
        raise _Rerun("a pass reached the database before its claim")
    runs = [(c.base.tenant_id, c.base.run_id) for c in claims]
    if store.held_back() == 0 and writes.writes_to(runs):
        for (tenant_id, run_id), claim in zip(runs, claims, strict=True):
            writes.claim(tenant_id, run_id, claim.run.state.version, claim.event)
        return
    with store.ahead():
        won = _claim_all(store, claims, now)
    if len(won) != len(claims):
        store.discard_held()
        raise _Rerun("a claim lost")


@fast_init
@dataclass(frozen=True)
class _Claim:
    """A due suspension to claim: the claim event at the version read, and what the
    pass needs once the claim is won."""

    base: ResumeResult
    run: LoadedRun
    definition: WorkflowDefinition
    event: StepResumed
    wake_at: datetime


def _claim_all(store: Store, claims: Sequence[_Claim], now: datetime) -> set[tuple[str, str]]:
    """Append every claim at its run's version read (StreamStore.append_to_runs); the
    (tenant, run) whose claim landed. A claim that loses met a newer event: another
    resume, a cancel, a redrive."""
    appends = [(c.base.tenant_id, c.base.run_id, c.run.state.version, c.event) for c in claims]
    return store.streams.append_to_runs(appends, now)


def _decide(
    store: Store,
    item: ResumeRequestItem,
    run: LoadedRun,
    now: datetime,
    registry: WorkflowRegistry,
    hosts: DefinitionHosts | None,
) -> ResumeResult | _Claim:
    """What to do with one request, from its run as read: an answer without a pass
    (already-resumed, not-due, on-kept-version, failed because its definition is gone),
    or a claim."""
    tenant_id, run_id = item.tenant_id, item.run_id
    state = run.state

    base = ResumeResult("already-resumed", tenant_id, run_id, item.step_index)
    suspension = state.suspension
    if state.status != "waiting" or suspension is None:
        return base
    if not state.waits_at(item.step_index):
        return replace(base, waiting_at=suspension.step_index)
    # A request for the step a migration moved the suspension from is for this very
    # suspension (sent before the move): the pass goes on where the run waits now.
    step_index = suspension.step_index
    matched = state.matched_event_id
    by_work = isinstance(suspension, (TaskScheduled, TasksScheduled, ChildrenWaiting))
    if by_work:
        if not state.outcome_ready:
            # Not even force resumes work without its outcome: the pass would have
            # nothing to put under its key. The worker (or the join's last child)
            # resumes it once it is recorded.
            waiting = "children" if isinstance(suspension, ChildrenWaiting) else "task"
            return replace(base, outcome="not-due", reason=f"waiting_for_{waiting}")
        wake_at = state.outcome_recorded_at or now
    else:
        wake_at = suspension.due_at
        if matched is None and not item.force and wake_at > now:
            return replace(base, outcome="not-due", wake_at=wake_at)
    definition = registry.find(state.workflow_name, state.fingerprint)
    moved_to: str | None = None
    if definition is None:
        # Its own definition is gone from the code: one whose shape agrees, the kept code
        # that has it, or none. A request handed here as the kept code is not handed on.
        serving = serving_definition(
            store,
            registry,
            state.workflow_name,
            state.fingerprint,
            suspension.path,
            None if item.forwarded_from else hosts,
            RESUME_RUN,
            item.gone,
        )
        definition = serving.definition
        if serving.how == "kept" and definition is None:
            return replace(base, outcome="on-kept-version", kept_on=serving.host)
        if definition is None:
            error = _not_registered_error(registry, state.workflow_name, run_id, state.fingerprint)
            error = f"{error} It resumes on no registered definition: {serving.detail}."
            if item.forwarded_from:
                error += f" It was handed here by {item.forwarded_from} as its kept version."
            reason = "workflow_definition_changed"
            if fail_run(store, state, state.version, step_index, reason, error, now):
                return replace(base, outcome="failed", reason=reason)
            return base
        if serving.how == "shape":
            moved_to = definition.fingerprint
    resumed_by: ResumedBy
    if isinstance(suspension, StepWaitingForEvent):
        resumed_by = "event" if matched else "timeout"
    elif isinstance(suspension, (TaskScheduled, TasksScheduled)):
        resumed_by = "task"
    elif isinstance(suspension, StepWaitingForCallback):
        resumed_by = "callback" if matched else suspension.timer
    elif isinstance(suspension, ChildrenWaiting):
        resumed_by = "children"
    else:
        resumed_by = "timer"
    if item.force and matched is None and not by_work and wake_at > now:
        resumed_by = "forced"
    event = StepResumed(
        step_index=step_index,
        path=suspension.path or None,
        retry_attempt=suspension.attempt if isinstance(suspension, RetryScheduled) else None,
        suspension_version=state.suspension_version,
        awaited_event_id=matched,
        resumed_by=resumed_by,
        task_id=suspension.task_id if isinstance(suspension, TaskScheduled) else None,
        # A run that goes on on another definition than its own says which.
        definition_fingerprint=moved_to,
    )
    return _Claim(base, run, definition, event, wake_at)


def _continue_claimed(
    store: Store, claim: _Claim, now: datetime, writes: PassWrites
) -> ResumeResult:
    """The pass of a won claim (the stream now holds the claim at version + 1)."""
    state = claim.run.state
    suspension = state.suspension
    assert suspension is not None
    outcome = continue_run(
        store,
        claim.run,
        claim.definition,
        suspension,
        state.matched_event_id,
        state.version + 1,
        now,
        with_work=True,
        writes=writes,
    )
    return replace(
        claim.base,
        outcome=outcome.outcome,
        suspended_at=outcome.step_index if outcome.outcome == "suspended" else None,
        resumed_wake_at=outcome.wake_at,
        reason=outcome.reason,
        wake_at=claim.wake_at,
        task_id=outcome.task_id,
    )


def resume_run(
    store: Store,
    tenant_id: str,
    run_id: str,
    step_index: int,
    now: datetime,
    force: bool = False,
    registry: WorkflowRegistry | None = None,
    hosts: DefinitionHosts | None = REGISTERED_HOSTS,
) -> ResumeResult:
    """Resume a suspended run at `step_index`: claim, run to the next suspension or end.

    One transaction. Outcomes: already-resumed (nothing to do: resumed, settled, or
    another worker won the claim), not-due (its time has not come and no awaited event
    matched; `force` overrides), suspended, completed, failed, on-kept-version (its
    definition runs on the kept function version `kept_on`; nothing was done: resume
    it there, e.g. through ResumeRun, which hands it on).

    Raises:
        RunNotFound: the tenant has no such run.
    """
    item = ResumeRequestItem(tenant_id, run_id, step_index, force)
    with store.transaction():
        result = _resume_in_transaction(store, item, now, registry or default_registry(), hosts)
    if store.flow.wakes:
        wake_after_commit(store, now)
    return result


def resume_runs(
    store: Store,
    requests: Sequence[ResumeRequestItem],
    now: datetime,
    registry: WorkflowRegistry | None = None,
    hosts: DefinitionHosts | None = REGISTERED_HOSTS,
) -> list[ResumeResult | Exception]:
    """Resume several suspensions in one transaction: one commit for the batch.

    `hosts`: where kept code is found (None: nothing is kept; see definition/hosts.py).

    Each pass is still all or nothing. The batch runs without savepoints (they cost two
    round trips a pass); an unknown run is reported as its RunNotFound, which is raised
    before anything is written. A batch of timers' suspensions writes its claims with
    its passes (see _resume_all's `claims_last`); if one of them lost, the batch is
    rolled back and runs again claiming first, where a lost claim answers
    already-resumed. If anything else goes wrong mid-batch, nothing of the batch is
    committed and every request is run again in a transaction of its own, so one bad
    request costs its own pass only. A transient database failure raises: then none of
    the batch happened and all of it may be retried.
    """
    registry = registry or default_registry()
    for claims_last in (True, False):
        try:
            with store.transaction():
                done: list[ResumeResult | Exception] = list(
                    _resume_all(store, requests, now, registry, hosts, claims_last)
                )
            if store.flow.wakes:  # held back, or freed a slot held work waits for
                wake_after_commit(store, now)
            return done
        except TransientStoreError:
            raise
        except (_Rerun, StreamConflict) as error:
            if claims_last:  # a claim lost, or a pass needed the database: claim first
                log.debug("resume batch runs again, claiming first", extra={"detail": str(error)})
                continue
            failed: Exception = error
        except Exception as error:
            failed = error
        log.warning(
            "resume batch failed, resuming one by one",
            extra={"detail": exception_for_log(failed)},
        )
        break
    isolated: list[ResumeResult | Exception] = []
    for item in requests:
        try:
            with store.transaction():
                isolated.append(_resume_in_transaction(store, item, now, registry, hosts))
        except TransientStoreError:
            raise
        except StoreError as error:
            # The database refused what the pass wrote: repeating it would fail the
            # same way forever. The run fails instead, recorded, never resent.
            isolated.append(fail_refused_pass(store, item, now, error))
        except Exception as error:  # one bad item must not sink the others
            isolated.append(error)
    if store.flow.wakes:
        wake_after_commit(store, now)
    return isolated
