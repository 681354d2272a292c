"""Joins: the bookkeeping between a parent run and its child runs, done in the
transactions that already move the runs and by the worker — never a second pass,
never a thread.

- A parent's pass that reaches call_workflow, start_workflow or map records a join
  and its children (`record_join`, in the pass's transaction); the worker starts them
  (engine/children.py).
- Every transaction that settles a run calls `run_settled`: as a child, its row in
  every join that waits for it is marked settled; as a parent, its open call and map
  joins are closed and their running children cancelled (and theirs, recursively).
- The worker counts settled rows into their joins (`count_settled_children`, one join
  per transaction under its row lock) and, when a join is done (or failed and not
  caught, or its map's completion policy decided), tells the parent with a
  `workflow.children.settled` fact on the parent's stream; the pending projection marks
  the parent's row due and enqueues its resume. A map that ends before all its children
  did is stopped in that transaction (`_stop_map`): its children not started never
  start, its running ones are cancelled as a parent's end would cancel them (never one
  another owner needs), and a `workflow.step.stopped` fact before the tell says which.

A child settles once (its terminal event is appended once) and its row is counted
once (`counted`); the parent is told once (`notified_at`), while it still waits at
that join.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal, TypeAlias

from ..definition.completion import ALL_COMPLETED, Completion, CompletionReason, decide
from ..pass_result import ChildFailedError, ChildJoin
from ..store import ChildOutcome, JoinCount, NewChild, PassWrite, RunEnd, Store
from ..stream import (
    RUN_STREAM,
    ChildrenSettled,
    ChildrenWaiting,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunState,
    StepStopped,
    fold_run,
)

# What a parent's pending row records as matched once its join settled.
CHILDREN_OUTCOME = "workflow.children"
# Why a child was cancelled when its last owner ended (a parent's redrive revives it).
PARENT_ENDED = "parent run ended"
# Why a child whose workflow is not registered failed at once (it has no run).
UNKNOWN_WORKFLOW = "child_workflow_unknown"
# Why a running child was cancelled when its map stopped early: "map stopped (<why>)".
MAP_STOPPED = "map stopped"
# Why a map without a completion policy stops: a child failed and it does not catch.
CHILD_FAILED = ChildFailedError.reason
_APPEND_TRIES = 5
CancelOutcome: TypeAlias = Literal[
    "cancelled", "already-cancelled", "already-settled", "missing", "independent", "contended"
]


def ended_by_parent(cancel_reason: str | None) -> bool:
    """Whether a run was cancelled by its parent's end or its map's stop (not by an
    operator): its parent's redrive may revive it."""
    reason = cancel_reason or ""
    return reason == PARENT_ENDED or reason.startswith(f"{MAP_STOPPED} (")


def record_join(
    store: Store,
    tenant_id: str,
    run_id: str,
    join: ChildJoin,
    suspension_version: int | None,
    now: datetime,
) -> None:
    """Store a join a pass asked for, due to start at once."""
    store.children.insert_join(
        tenant_id,
        join.join_id,
        run_id,
        join.kind,
        join.workflow,
        suspension_version,
        join.concurrency,
        join.catch,
        [NewChild(i, c.run_id, c.key, c.input) for i, c in enumerate(join.children)],
        now,
        completion=join.completion.to_json() if join.completion else None,
    )


def run_settled(
    store: Store,
    tenant_id: str,
    run_id: str,
    status: str,
    result: Any,
    reason: str | None,
    now: datetime,
) -> None:
    """A run just settled (in the caller's transaction): as a child, mark it settled in
    every join that waits for it (the worker counts it); as a parent, close the joins it
    opened and cancel their running children."""
    runs_settled(store, tenant_id, [(run_id, RunEnd(status, result, reason))], now)


def runs_settled(
    store: Store, tenant_id: str, ended: Sequence[tuple[str, RunEnd]], now: datetime
) -> None:
    """What run_settled does, for several runs of a tenant, (run id, how it ended) each,
    in one statement (a run listed twice counts once)."""
    writes = {run_id: PassWrite(tenant_id, run_id, 0, ended=end) for run_id, end in ended}
    if writes:
        close_joins(store, store.streams.record_passes(list(writes.values()), now)(), now)


def count_if_settled(store: Store, tenant_id: str, run_id: str, now: datetime) -> bool:
    """A child whose rows are running (just marked, or never told): if its run has
    settled, mark them settled now, as its terminal transaction would have (in the
    caller's transaction); otherwise its own settling does it later. True if settled."""
    return count_settled_runs(store, tenant_id, [run_id], now) > 0


def count_settled_runs(store: Store, tenant_id: str, run_ids: Sequence[str], now: datetime) -> int:
    """What count_if_settled does, for several children of a tenant: their streams read
    in one statement, those settled marked in another. Returns how many had settled."""
    runs = [(tenant_id, run_id) for run_id in dict.fromkeys(run_ids)]
    if not runs:
        return 0
    ended: list[tuple[str, RunEnd]] = []
    for (_, run_id), read in zip(runs, store.streams.load_for_resume(runs), strict=True):
        events = read.events
        if not events:
            continue
        state = fold_run(run_id, tenant_id, [e.recorded for e in events])
        if not state.settled:
            continue
        last = events[-1].fact
        result = last.result if isinstance(last, RunCompleted) else None
        reason = last.reason if isinstance(last, RunFailed) else None
        ended.append((run_id, RunEnd(state.status, result, reason or state.status)))
    runs_settled(store, tenant_id, ended, now)
    return len(ended)


def tell_untold_children(store: Store, tenant_id: str | None, now: datetime) -> int:
    """Repair rows left running behind a settled child (the doctor's "child runs" check):
    mark them settled from the child's stream, one child per transaction, so the worker
    counts them and tells their parents. Returns the children told."""
    told = 0
    for child in {(u.tenant_id, u.child_run_id) for u in store.children.untold(tenant_id)}:
        with store.transaction():
            told += count_if_settled(store, *child, now)
    return told


def close_joins(store: Store, closed: list[tuple[str, str, str]], now: datetime) -> None:
    """Cancel the children of the joins their parents' end just closed, (tenant, parent
    run, join id) each: those pending never start (in these joins); a running one is
    cancelled only when nothing else owns it — no other open call or map join, no
    start_workflow join, and no event (a run an event started is never a call's to
    cancel, even when a call attached to it)."""
    by_tenant: dict[str, list[str]] = {}
    for tenant_id, _, join_id in closed:
        by_tenant.setdefault(tenant_id, []).append(join_id)
    for tenant_id, join_ids in sorted(by_tenant.items()):
        for child in sorted(store.children.close(tenant_id, join_ids, now)):
            # Parents sharing the child and ending at once decide one after the other,
            # each after the close of the one before it committed: the last one sees no
            # owner left and cancels it.
            store.children.lock_owners(tenant_id, child)
            if store.children.owned_elsewhere(tenant_id, child):
                continue
            cancel_in_transaction(store, tenant_id, child, now, PARENT_ENDED, True)


def count_settled_children(store: Store, now: datetime, max_joins: int = 50) -> int:
    """Count settled children into their joins, each join in its own transaction, and
    tell each parent whose join is now done (or failed and does not catch, or whose
    completion policy decided), stopping a map that ends early. Returns the children
    counted.

    Counting here, not in each child's transaction, keeps children that settle at
    once from queueing on their join's row; the rows stay the truth, so a crash
    between a child settling and its count loses nothing: the next call counts it. A
    stop is in the same transaction as the count that decides it: a crash anywhere in
    it leaves the join as it was, and the next call decides again.
    """
    counted = 0
    for tenant_id, join_id in store.children.joins_with_uncounted(max_joins):
        try:
            with store.transaction():
                found = store.children.count_settled(tenant_id, join_id, now)
                if found is None:
                    continue
                count, children = found
                _maybe_tell_parent(store, count, children, now)
                counted += len(children)
        except _StopNotRecorded:
            continue  # rolled back: counted again (and stopped then) by the next call
    return counted


class _StopNotRecorded(Exception):
    """A stop could not be finished and recorded in its transaction (a child's passes
    kept appending, or the parent's stream moved): the transaction rolls back."""


@dataclass(frozen=True)
class _Ending:
    """Why a join's parent is told now, and whether its map is stopped."""

    completion: CompletionReason | None  # decided by a completion policy
    stop_reason: str | None  # the map ends before its children did


def _ending(count: JoinCount) -> _Ending | None:
    """Whether the join ends with this count (None: its parent waits on)."""
    if count.completion is not None:
        decided = decide(
            Completion.from_json(count.completion),
            count.total,
            count.settled - count.failed,
            count.failed,
        )
        if decided is None:
            return None
        return _Ending(decided, decided if decided != ALL_COMPLETED else None)
    if count.failed > 0 and not count.catch:
        return _Ending(None, CHILD_FAILED)  # fail fast
    return _Ending(None, None) if count.settled >= count.total else None


def _maybe_tell_parent(
    store: Store, count: JoinCount, children: list[ChildOutcome], now: datetime
) -> None:
    if count.kind == "start" or count.notified or count.closed:
        return
    ending = _ending(count)
    if ending is None:
        return
    failure = next((c for c in children if c.status != "completed"), None)
    stopped: StepStopped | None = None
    if ending.stop_reason is not None and count.kind == "map" and count.settled < count.total:
        state = _state(store, count.tenant_id, count.parent_run_id)
        if state is None or not _waits_at(state, count.join_id):
            return  # its parent moved on or ended: its end closes the join
        stopped = _stop_map(store, count, state, ending.stop_reason, now)
    settled = ChildrenSettled(
        join_id=count.join_id,
        suspension_version=count.suspension_version or 0,
        step_index=0,
        settled=count.settled,
        failed=count.failed,
        reason=(failure.reason or failure.status) if failure else None,
        child_run_id=failure.child_run_id if failure else None,
        completion=ending.completion,
    )
    if _append_to_waiting_parent(store, count, settled, now, stopped):
        # The pending projection marks the parent's row due and enqueues its resume.
        store.children.mark_notified(count.tenant_id, count.join_id, now)
    elif stopped is not None:
        raise _StopNotRecorded(count.join_id)


def _stop_map(
    store: Store, count: JoinCount, parent: RunState, reason: str, now: datetime
) -> StepStopped:
    """Stop a map (in the transaction that holds its join): children not started never
    start, running ones are cancelled unless another owner still needs them (as when
    its parent ends: see close_joins). Returns the fact that records it."""
    tenant_id = count.tenant_id
    not_started = store.children.stop(tenant_id, count.join_id, now)
    cancelled: list[int] = []
    kept: list[int] = []
    why = f"{MAP_STOPPED} ({reason})"
    for index, child in store.children.running_of(tenant_id, count.join_id):
        store.children.lock_owners(tenant_id, child)
        if store.children.owned_elsewhere(tenant_id, child):
            kept.append(index)
            continue
        outcome = cancel_in_transaction(store, tenant_id, child, now, why, True)
        if outcome == "contended":
            raise _StopNotRecorded(child)
        if outcome == "cancelled":
            cancelled.append(index)
        elif outcome == "independent":
            kept.append(index)  # an event started it: never a parent's to cancel
        # already settled: it ended on its own, and is counted as it ended
    open_ = parent.suspension
    assert open_ is not None
    return StepStopped(
        kind="map",
        step_index=open_.step_index,
        path=list(open_.path),
        suspension_version=parent.suspension_version,
        reason=reason,
        join_id=count.join_id,
        cancelled=tuple(cancelled),
        kept=tuple(kept),
        not_started=len(not_started),
    )


def _waits_at(state: RunState, join_id: str) -> bool:
    open_ = state.suspension
    return (
        isinstance(open_, ChildrenWaiting)
        and open_.join_id == join_id
        and state.children_settled is None
    )


def _append_to_waiting_parent(
    store: Store,
    count: JoinCount,
    fact: ChildrenSettled,
    now: datetime,
    stopped: StepStopped | None = None,
) -> bool:
    """Append `fact` (after `stopped`, if the map was stopped) while the parent still
    waits at the join's suspension."""
    for _ in range(_APPEND_TRIES):
        state = _state(store, count.tenant_id, count.parent_run_id)
        if state is None or not _waits_at(state, count.join_id):
            return False
        open_ = state.suspension
        assert open_ is not None
        fact = replace(
            fact, suspension_version=state.suspension_version, step_index=open_.step_index
        )
        facts: list[ChildrenSettled | StepStopped] = [fact] if stopped is None else [stopped, fact]
        if store.streams.append(
            count.tenant_id, count.parent_run_id, RUN_STREAM, state.version, facts, now
        ):
            return True
    return False


def _state(store: Store, tenant_id: str, run_id: str) -> RunState | None:
    events, _ = store.streams.load_run(tenant_id, run_id, tail=True)
    if not events:
        return None
    return fold_run(run_id, tenant_id, [e.recorded for e in events])


def cancel_in_transaction(
    store: Store,
    tenant_id: str,
    run_id: str,
    now: datetime,
    reason: str | None,
    as_child: bool = False,
) -> CancelOutcome:
    """Cancel a run inside the caller's transaction: `cancelled`, `already-cancelled`,
    `already-settled`, `missing`, `independent` (`as_child`: the run was not started by
    a parent, so a parent's end leaves it alone), or `contended` (passes kept appending
    first)."""
    # Its open joins first: the worker locks a join before it tells the join's parent
    # (an append to this stream), so both take the two in one order.
    store.children.lock_open_joins(tenant_id, run_id)
    for _ in range(_APPEND_TRIES):
        state = _state(store, tenant_id, run_id)
        if state is None or state.started is None:
            return "missing"
        if as_child and state.started.parent_run_id is None:
            return "independent"
        if state.status == "cancelled":
            return "already-cancelled"
        if state.settled:
            return "already-settled"
        cancelled = RunCancelled(
            workflow_name=state.workflow_name,
            step_index=state.suspension.step_index if state.suspension else None,
            reason=reason or None,
        )
        if store.streams.append(tenant_id, run_id, RUN_STREAM, state.version, [cancelled], now):
            break
    else:
        return "contended"
    store.tasks.cancel_for_run(tenant_id, run_id, now)
    store.runs.upsert(
        tenant_id,
        run_id,
        state.workflow_name,
        "cancelled",
        state.version + 1,
        state.fingerprint,
        state.trigger_event_type,
        now,
    )
    run_settled(store, tenant_id, run_id, "cancelled", None, "cancelled", now)
    return "cancelled"
