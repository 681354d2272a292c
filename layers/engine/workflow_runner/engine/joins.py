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
  caught), tells the parent with a `workflow.children.settled` fact on the parent's
  stream; the pending projection marks the parent's row due and enqueues its resume.

A child settles once (its terminal event is appended once) and its row is counted
once (`counted`); the parent is told once (`notified_at`), while it still waits at
that join.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any, Literal, TypeAlias

from ..pass_result import ChildJoin
from ..store import ChildOutcome, JoinCount, NewChild, PassWrite, RunEnd, Store
from ..stream import (
    RUN_STREAM,
    ChildrenSettled,
    ChildrenWaiting,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunState,
    fold_run,
)

# What a parent's pending row records as matched once its join settled.
CHILDREN_OUTCOME = "workflow.children"
# Why a child was cancelled when its last owner ended (a parent's redrive revives it).
PARENT_ENDED = "parent run ended"
# Why a child whose workflow is not registered failed at once (it has no run).
UNKNOWN_WORKFLOW = "child_workflow_unknown"
_APPEND_TRIES = 5
CancelOutcome: TypeAlias = Literal[
    "cancelled", "already-cancelled", "already-settled", "missing", "independent", "contended"
]


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
    ended = PassWrite(tenant_id, run_id, 0, ended=RunEnd(status, result, reason))
    close_joins(store, store.streams.record_passes([ended], now)(), now)


def count_if_settled(store: Store, tenant_id: str, run_id: str, now: datetime) -> bool:
    """A child whose rows are running (just marked, or never told): if its run has
    settled, mark them settled now, as its terminal transaction would have (in the
    caller's transaction); otherwise its own settling does it later. True if settled."""
    events, _ = store.streams.load_run(tenant_id, run_id, tail=True)
    if not events:
        return False
    state = fold_run(run_id, tenant_id, [e.recorded for e in events])
    if not state.settled:
        return False
    last = events[-1].fact
    result = last.result if isinstance(last, RunCompleted) else None
    reason = last.reason if isinstance(last, RunFailed) else None
    run_settled(store, tenant_id, run_id, state.status, result, reason or state.status, now)
    return True


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
    tell each parent whose join is now done (or failed and does not catch). Returns the
    children counted.

    Counting here, not in each child's transaction, keeps children that settle at
    once from queueing on their join's row; the rows stay the truth, so a crash
    between a child settling and its count loses nothing: the next call counts it.
    """
    counted = 0
    for tenant_id, join_id in store.children.joins_with_uncounted(max_joins):
        with store.transaction():
            found = store.children.count_settled(tenant_id, join_id, now)
            if found is None:
                continue
            count, children = found
            counted += len(children)
            _maybe_tell_parent(store, count, children, now)
    return counted


def _maybe_tell_parent(
    store: Store, count: JoinCount, children: list[ChildOutcome], now: datetime
) -> None:
    if count.kind == "start" or count.notified or count.closed:
        return
    done = count.settled >= count.total
    failed_fast = count.failed > 0 and not count.catch
    if not (done or failed_fast):
        return
    failure = next((c for c in children if c.status != "completed"), None)
    settled = ChildrenSettled(
        join_id=count.join_id,
        suspension_version=count.suspension_version or 0,
        step_index=0,
        settled=count.settled,
        failed=count.failed,
        reason=(failure.reason or failure.status) if failure else None,
        child_run_id=failure.child_run_id if failure else None,
    )
    if _append_to_waiting_parent(store, count, settled, now):
        # The pending projection marks the parent's row due and enqueues its resume.
        store.children.mark_notified(count.tenant_id, count.join_id, now)


def _append_to_waiting_parent(
    store: Store, count: JoinCount, fact: ChildrenSettled, now: datetime
) -> bool:
    """Append `fact` while the parent still waits at the join's suspension."""
    for _ in range(_APPEND_TRIES):
        state = _state(store, count.tenant_id, count.parent_run_id)
        open_ = state.suspension if state is not None else None
        if (
            state is None
            or not isinstance(open_, ChildrenWaiting)
            or open_.join_id != count.join_id
            or state.children_settled is not None
        ):
            return False
        fact = replace(
            fact, suspension_version=state.suspension_version, step_index=open_.step_index
        )
        if store.streams.append(
            count.tenant_id, count.parent_run_id, RUN_STREAM, state.version, [fact], now
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
