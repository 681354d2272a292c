"""Slots freed go to held work: a release hands them over in its own transaction, and a
look after a commit wakes the oldest held work of a key for every slot free and not
yet promised.

A release (an attempt's outcome, or a claim giving back what it could not use) hands
each slot it frees to the first attempt queued for the key, in the same transaction:
the slot is leased to that attempt's work and its task row is due now, so the worker
that claims it adopts the slot without a look, a count or a wait (issue 34: on one hot
key, the look after every release locked all the key's slots, one more fsync'd commit
each, and claims queued behind it). A queued pass cannot be handed a slot (it holds one
by its row lock for its transaction only), nor can an attempt whose row a claim holds
at that moment: a release stops at the first of those and leaves the rest to a look.

A look runs in one short transaction per key. It first locks every slot of the key, so
a pass that holds one is waited for (milliseconds) and counted free once it committed:
a look after a hold can never miss a slot freed in between. Work found gone (its run
cancelled, its task settled) leaves the queue. Woken attempts get their slots handed
over as above; a woken resume's pending row is due now (the caller sends it to the
resume queue at once; the due scan would otherwise). The oldest work left waiting gets
a safety timer: the end of the first lease among the key's slots (a worker that died,
or an attempt handed a slot that never came for it, frees it only then), at most
SAFETY_SECONDS away, so even woken work that vanished before it took its slot cannot
leave the queue asleep. The timer only ever brings work forward: two releases of one
key at once, one timing the head the other had just woken, left that attempt due only
at the handover's end with a slot handed to it (issue 34's stuck tail).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta

from ..store import DueRow, Store
from .store import Waiter, Woken

# The longest the oldest held work of a key sleeps without a look at its key.
SAFETY_SECONDS = 60.0
# How far into a key's queue a look looks for gone work (see _drop_dead_front): a
# stretch of this many rows per slot of the key (at least DEAD_STRETCH_MIN), at most
# DEAD_LOOK_ROWS rows a look.
DEAD_STRETCH_PER_SLOT = 4
DEAD_STRETCH_MIN = 20
DEAD_LOOK_ROWS = 500
# How long a slot handed over to a queued attempt waits for a worker to claim it before
# it is free again (its worker, or every worker, gone).
HANDOVER_SECONDS = 30.0


def wake_after_commit(store: Store, now: datetime) -> list[DueRow]:
    """Look at the keys the last transactions asked for (`store.flow.wakes`), each in a
    transaction of its own; the held resumes woken (also kept in `store.flow.woken` for
    a caller that sends them on)."""
    keys, store.flow.wakes = store.flow.wakes, {}
    woken: list[DueRow] = []
    ordered = sorted(keys)
    for n, key in enumerate(ordered):
        try:
            woken += wake_key(store, key, keys[key], now)
        except BaseException:
            # A look that failed (a transient error) and those after it stay asked for,
            # so the caller's next try looks at them (the safety timer is the backstop).
            for left in ordered[n:]:
                store.flow.wakes.setdefault(left, keys[left])
            store.flow.woken.extend(woken)
            raise
    store.flow.woken.extend(woken)
    return woken


def wake_key(store: Store, key: str, limit: int, now: datetime) -> list[DueRow]:
    """Wake a key's oldest held work for its free slots (see the module docstring)."""
    with store.transaction():
        free = store.flow.count_free(key, limit, now)
        _drop_dead_front(store, key, limit)
        until = now + timedelta(seconds=HANDOVER_SECONDS)
        woken = (
            store.flow.hand_over(key, free.slots, free.count, until, now, look=True)
            if free.count
            else []
        )
        _note_waits(store, woken, now)
        due = store.flow.due_pending([w.waiter for w in woken if w.waiter.task_id is None], now)
        _safety_timer(store, key, now, free.next_lease_end)
    return due


def _drop_dead_front(store: Store, key: str, limit: int) -> None:
    """Drop gone work from the front of a key's queue, where this look wakes from: a
    stretch of a few times the key's limit, and the next stretch while the last was more
    dead than live (a run cancelled with many attempts queued), up to DEAD_LOOK_ROWS in
    all. The look holds every slot of the key meanwhile, so it reads no further than the
    work it could wake (500 rows each look, before: 7 ms a look with one key's 10,000
    attempts queued, every release of the key waiting behind it)."""
    stretch = min(DEAD_LOOK_ROWS, max(DEAD_STRETCH_MIN, DEAD_STRETCH_PER_SLOT * limit))
    looked = 0
    while looked < DEAD_LOOK_ROWS:
        rows = min(stretch, DEAD_LOOK_ROWS - looked)
        dropped = store.flow.drop_dead_waiters(key, rows)
        looked += rows
        if dropped * 2 <= rows:
            return


def hand_on(store: Store, key: str, limit: int, slots: list[int], now: datetime) -> None:
    """Hand the slots of `key` a release just freed to the attempts first in its queue,
    in the release's transaction; what is left (a pass first in line, an attempt a claim
    holds) is looked at after the commit."""
    until = now + timedelta(seconds=HANDOVER_SECONDS)
    woken = store.flow.hand_over(key, slots, len(slots), until, now, look=False)
    _note_waits(store, woken, now)
    if len(woken) < len(slots):
        store.flow.wakes[key] = limit
    elif woken:
        _safety_timer(store, key, now, until)


def _note_waits(store: Store, woken: Sequence[Woken], now: datetime) -> None:
    for item in woken:
        wait = (now - item.queued_at).total_seconds()
        store.flow.waits.append((item.waiter.workflow_name, max(0.0, wait)))


def _safety_timer(store: Store, key: str, now: datetime, lease_end: datetime | None) -> None:
    at = now + timedelta(seconds=SAFETY_SECONDS)
    if lease_end is not None:
        at = min(at, lease_end)
    store.flow.time_head(key, at)


def queue_on_one(
    store: Store,
    waiters: Sequence[Waiter],
    blocked: Sequence[Waiter],
    limits: dict[str, int],
    now: datetime,
    promised: Collection[str] | None = None,
) -> None:
    """Held work that needs several keys waits in one queue only: the first key (in key
    order) it could not have. It leaves the other keys' queues, so it never keeps a slot
    of one key promised (woken) while it waits for another, which would let two keys'
    waiters wait for each other for good. The key it waits on is looked at after the
    commit (a slot freed before the commit saw no waiter), and so is each other key
    whose slot it leaves promised: every key it touched (None, a pass: woken, it holds
    no slot, only a promise), or the keys in `promised` (a task attempt: a slot handed to
    it went back with its release, which hands it on, so only a key whose handover had
    ended before it came is left with a promise nobody keeps)."""
    wait_on = min(blocked, key=lambda w: w.flow_key)
    others = [w for w in waiters if w.flow_key != wait_on.flow_key]
    if others:
        store.flow.admitted(others)  # leaves those queues
    store.flow.queue([wait_on], now)
    for waiter in waiters:
        key = waiter.flow_key
        if promised is None or key == wait_on.flow_key or key in promised:
            store.flow.wakes[key] = limits[key]
