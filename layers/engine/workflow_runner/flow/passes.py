"""A pass takes its run's concurrency slots: a row lock per key, held by the pass's
transaction and released by its commit (or by its connection dying), so no lease is
needed and no pass is ever counted twice.

`admit_passes` takes the slots of a batch of passes in one statement (SKIP LOCKED: a
slot another pass holds is not waited for). A key with held work waiting gives its free
slots to that work first (the woken), in arrival order; other passes of the key then
queue behind it. A pass that gets no slot is held: its run stays at its suspension, its
pending row waits with no wake time, its place in the key's queue is recorded, and
after the commit the key is looked at again (`wake.wake_after_commit`), which wakes the
oldest held work as soon as a slot is free — never a busy loop, and no wakeup is lost:

- a slot a pass holds frees at that pass's commit; the look after a hold locks every
  slot of the key (waiting for such a pass to end) before it counts the free ones;
- a pass that took its slot while held work waited looks at the key after its commit;
- a task attempt's slot is given back in its outcome's transaction, which looks at
  the key after its commit when held work waits (flow/tasks.py).

Woken passes that got no slot at all wait for the slots' locks instead: a look (this
worker's or another's) locks every slot of the key while it counts, and skipping them
would hold back again the pass promised a slot, whose hold asks for another look, which
locks the slots again — with many workers, wakes that feed on themselves instead of work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ..definition import DomainEvent, WorkflowDefinition
from ..store import Store
from ..stream import NEVER
from .keys import event_context, run_slots
from .limits import LimitSpec
from .store import Waiter
from .wake import queue_on_one


@dataclass(frozen=True)
class PassWork:
    """A pass that needs its run's concurrency slots (`slots`: one per key)."""

    tenant_id: str
    run_id: str
    step_index: int
    workflow_name: str
    slots: tuple[LimitSpec, ...]

    def waiter(self, spec: LimitSpec) -> Waiter:
        return Waiter(
            spec.flow_key,
            self.tenant_id,
            self.run_id,
            self.step_index,
            "pass",
            self.workflow_name,
            spec.priority,
        )


def pass_work(
    definition: WorkflowDefinition,
    event: DomainEvent,
    run_id: str,
    step_index: int,
    now: datetime,
) -> PassWork | None:
    """The slots a pass of this run needs (None: its workflow has no concurrency)."""
    flow = definition.flow
    if flow is None or not flow.concurrency:
        return None
    ctx = event_context(definition, event, run_id, now)
    return PassWork(
        event.tenant_id,
        run_id,
        step_index,
        definition.name,
        tuple(run_slots(flow, definition, ctx)),
    )


def admit_passes(
    store: Store, works: Sequence[PassWork], now: datetime, queue_held: bool = True
) -> set[int]:
    """Take the slots of `works` in the caller's transaction; the indexes of those held
    back. With `queue_held` (a resume) the held ones are queued and parked (see the
    module docstring); without (a new run's first pass) the caller holds the run."""
    if not works:
        return set()
    specs: dict[str, LimitSpec] = {}
    counts: dict[str, int] = {}
    for work in works:
        for spec in work.slots:
            specs.setdefault(spec.flow_key, spec)
            counts[spec.flow_key] = counts.get(spec.flow_key, 0) + 1
    wanted = {key: (specs[key].limit, n) for key, n in counts.items()}
    got, queued = store.flow.take_slots(wanted, now)
    short = [specs[k] for k in wanted if got[k] < counts[k] and k not in queued]
    if short:
        # First use of a key, or its limit grew: create its slots and take again (the
        # same statement returns the slots this transaction locked already, and more).
        # A take also comes back short while the key's slots all exist, rows other
        # transactions changed meanwhile (SKIP LOCKED): the take again finds them. Held
        # back instead, the generous limit's backlog drain ran 1.6x slower.
        store.flow.ensure_slots(short, now)
        again, more_queued = store.flow.take_slots(
            {s.flow_key: wanted[s.flow_key] for s in short}, now
        )
        got.update(again)
        queued |= more_queued
    # Per pass and key: None (not queued), False (queued, waiting) or True (woken).
    places: dict[tuple[int, str], bool | None] = {}
    asked = [(i, spec) for i, w in enumerate(works) for spec in w.slots if spec.flow_key in queued]
    if asked:
        state = store.flow.queue_state([works[i].waiter(spec) for i, spec in asked])
        for (i, spec), (_, mine) in zip(asked, state, strict=True):
            places[(i, spec.flow_key)] = mine
    woken: dict[str, int] = {}
    for (_, key), mine in places.items():
        if mine:
            woken[key] = woken.get(key, 0) + 1
    if woken and not any(got.values()):
        # Woken passes whose slots a look is counting (it locks them all): wait for the
        # look rather than be held again and woken by another look, which would lock
        # them again. Only while this transaction holds no slot, so that a wait never
        # closes a cycle (waits in key order, as looks and woken task attempts).
        again, _ = store.flow.take_slots(
            {k: (specs[k].limit, n) for k, n in woken.items()}, now, waiting=True
        )
        got.update(again)
    held: set[int] = set()
    lacking: dict[int, list[LimitSpec]] = {}
    # The woken first: the free slots of a queued key were promised to them.
    order = sorted(
        range(len(works)),
        key=lambda i: not any(places.get((i, s.flow_key)) for s in works[i].slots),
    )
    left = dict(got)
    for i in order:
        missing = [
            spec
            for spec in works[i].slots
            if left[spec.flow_key] <= 0
            or (spec.flow_key in queued and places.get((i, spec.flow_key)) is not True)
        ]
        if missing:
            held.add(i)
            lacking[i] = missing
            continue
        for spec in works[i].slots:
            left[spec.flow_key] -= 1
    admitted_waiters = [
        works[i].waiter(spec)
        for i in range(len(works))
        if i not in held
        for spec in works[i].slots
        if places.get((i, spec.flow_key)) is not None
    ]
    if admitted_waiters:
        store.flow.admitted(admitted_waiters)
    for i in range(len(works)):
        if i not in held:
            for spec in works[i].slots:
                if spec.flow_key in queued:
                    # Its slot frees at the commit, with held work waiting for it.
                    store.flow.wakes[spec.flow_key] = spec.limit
    if held and queue_held:
        limits = {key: spec.limit for key, spec in specs.items()}
        for i in sorted(held):
            waiters = [works[i].waiter(spec) for spec in works[i].slots]
            blocked = [works[i].waiter(spec) for spec in lacking[i]]
            queue_on_one(store, waiters, blocked, limits, now)
        store.flow.park_pending(
            [(works[i].tenant_id, works[i].run_id, works[i].step_index) for i in sorted(held)],
            NEVER,
        )
    return held
