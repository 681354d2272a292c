"""Starting child runs: the worker's share of call_workflow, start_workflow and map.

A parent's pass records a join and its children (engine/joins.py); the worker claims
joins with children due to start and starts at most `concurrency - running` of them,
and at most `batch` per transaction, so a map over 10,000 items starts its children
across many transactions (and Lambda invocations) as slots free up. Each start is in
the transaction that marks the child running and counts it in its join, so a crash
never starts a child twice nor leaves one counted but not started. A child's input
is stored as its trigger event (type `workflow.call`) in the inbox, like any domain
event (erasable the same way). A batch goes in a few round trips whatever its size:
its runs claimed in one statement and their first passes written in one pipeline
(run_starts.py, as an intake batch of trigger events starts its runs).

A child's run id derives from its workflow and key: a key another join already used
finds that run instead of starting a second one, and the join counts it when it
settles (at once, if it already has).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ..definition import DomainEvent, WorkflowRegistry
from ..definition.branches import family_member
from ..store import ClaimedJoin, NewChild, RunEnd, Store
from .joins import UNKNOWN_WORKFLOW, count_settled_runs, runs_settled
from .redrive import RedriveRefused, redrive_run
from .run_starts import RunStart, claim_runs, first_passes, run_started

log = logging.getLogger("workflow_runner")

CHILD_EVENT_TYPE = "workflow.call"
CHILD_EVENT_SOURCE = "workflow-runner"
CHILD_NAMESPACE = uuid.UUID("5e3b6f0a-8d1c-4c2e-9b7a-2f4d6e8a0c13")
# Children started per transaction (a join with more to start is claimed again).
START_BATCH = 100


@dataclass(frozen=True)
class StartedChildren:
    """What one call of start_children did."""

    joins: int = 0
    started: int = 0
    attached: int = 0  # the run existed already (same workflow and key)
    unknown: int = 0  # the workflow is not registered: the child failed at once

    def __add__(self, other: StartedChildren) -> StartedChildren:
        return StartedChildren(
            self.joins + other.joins,
            self.started + other.started,
            self.attached + other.attached,
            self.unknown + other.unknown,
        )


def start_children(
    store: Store,
    registry: WorkflowRegistry,
    now: datetime,
    max_joins: int = 10,
    batch: int = START_BATCH,
) -> StartedChildren:
    """Start due children of up to `max_joins` joins, each join in its own transaction.

    A join gets one batch a call: the caller counts settled children between calls
    (count_settled_children), so a map whose completion policy (or uncaught failure)
    the batch's children decide is stopped before another batch starts, even when its
    children end in their first pass."""
    done = StartedChildren()
    served: list[tuple[str, str]] = []
    for _ in range(max_joins):
        with store.transaction():
            claimed = store.children.claim(now, 1, served)
            if not claimed:
                break
            join = claimed[0]
            served.append((join.tenant_id, join.join_id))
            free = max(0, join.concurrency - join.running)
            children = store.children.to_start(join, min(free, batch)) if free else []
            done = done + _start_batch(store, registry, join, children, now)
    return done


def _start_batch(
    store: Store,
    registry: WorkflowRegistry,
    join: ClaimedJoin,
    children: Sequence[NewChild],
    now: datetime,
) -> StartedChildren:
    """Start a batch of a claimed join's children, in the caller's transaction, in a few
    round trips whatever the batch's size: the inputs stored and the runs claimed (their
    first events, one statement), the rows marked running, the join's count and the
    first passes' writes (one pipeline), the attached children read and counted if
    settled (one statement, and one more if some had)."""
    events = [_trigger(join, child, now) for child in children]
    starts = [_child_start(registry, join, c, e) for c, e in zip(children, events, strict=True)]
    known = [start for start in starts if start is not None]
    with store.pipeline():
        store.children.store_inputs(
            join.tenant_id,
            [(e.id, e.payload) for e in events],
            CHILD_EVENT_TYPE,
            CHILD_EVENT_SOURCE,
            now,
        )
        won = claim_runs(store, known, now)  # a run another starter creates waits here
    attached = [
        child
        for child, start in zip(children, starts, strict=True)
        if start is not None and id(start) not in won
    ]
    for child in attached:
        if child.revive:
            _revive(store, registry, join.tenant_id, child.child_run_id, now)
    unknown = [child for child, start in zip(children, starts, strict=True) if start is None]
    with store.pipeline():
        # The rows are marked running once every child's run exists (marked before, they
        # would be held while an append waits for another starter creating the same run,
        # whose pass, settling it, waits for them) and before the first passes: a child
        # its first pass ends marks its rows settled in the pass's write, as a later end
        # would. An attached child is read again after the mark: one that
        # settled before the mark committed is counted here, one that settles after finds
        # its row running (see record_pass's lock order).
        store.children.mark_running(join, [c.item_index for c in children], now)
        last = children[-1].item_index + 1 if children else join.next_index
        store.children.started(join, last, len(children), now)
        first_passes(store, known, won, now)
        # No such workflow: the child fails at once (it has no run to show).
        failed = RunEnd("failed", None, UNKNOWN_WORKFLOW)
        runs_settled(store, join.tenant_id, [(c.child_run_id, failed) for c in unknown], now)
    count_settled_runs(store, join.tenant_id, [c.child_run_id for c in attached], now)
    return StartedChildren(1, len(known) - len(attached), len(attached), len(unknown))


def _trigger(join: ClaimedJoin, child: NewChild, now: datetime) -> DomainEvent:
    """A child's trigger event: its input, stored in the inbox like a domain event."""
    return DomainEvent(
        id=str(uuid.uuid5(CHILD_NAMESPACE, f"{join.join_id}|{child.item_index}")),
        type=CHILD_EVENT_TYPE,
        payload=child.input,
        tenant_id=join.tenant_id,
        time=now,
        source=CHILD_EVENT_SOURCE,
    )


def _child_start(
    registry: WorkflowRegistry, join: ClaimedJoin, child: NewChild, event: DomainEvent
) -> RunStart | None:
    """The child's run to start (None: no such workflow; nothing is written for it)."""
    member = family_member(join.child_workflow, child.item_index)
    if member is not None:
        # A parallel's branch: that branch of the parent's version (its latest when that
        # version is gone: the parent goes on on another of the same shape).
        definition = registry.version(*member)
        if definition is None and member[0] in registry.all_names():
            definition = registry.latest(member[0])
    else:
        try:
            definition = registry.latest(join.child_workflow)
        except Exception:
            return None
        if definition.branch_of is not None:
            definition = None  # a branch runs only for its parallel
    if definition is None:
        return None
    started = run_started(
        definition,
        event,
        idempotency_key=child.child_key,
        trigger_event_id=event.id,
        parent_run_id=join.parent_run_id,
        map_index=child.item_index if join.kind == "map" else None,
    )
    return RunStart(definition, event, child.child_run_id, started)


def _revive(
    store: Store, registry: WorkflowRegistry, tenant_id: str, run_id: str, now: datetime
) -> None:
    """A child of a join its parent's redrive reopened: redrive its run (failed, or
    cancelled by the parent's end) so that it goes on from where it stopped. A run that
    cannot be redriven (the parent's redrive checked, but it may have moved since) is
    counted as it ended."""
    try:
        redrive_run(store, tenant_id, run_id, now, registry, revive=True)
    except RedriveRefused as refused:
        log.info("child not revived", extra={"run_id": run_id, "detail": str(refused)})
