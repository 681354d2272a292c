"""After a commit that held work back or freed a slot: look at each key concerned, and
wake its oldest held work for every slot free and not yet promised.

One short transaction per key. It first locks every slot of the key, so a pass that
holds one is waited for (milliseconds) and counted free once it committed: a look after
a hold can never miss a slot freed in between. Work found gone (its run cancelled, its
task settled) leaves the queue. A woken resume's pending row is due now (the caller
sends it to the resume queue at once; the due scan would otherwise); a woken task is
due now (the worker's loop claims it). The oldest work left waiting gets a safety
timer: the end of the first task lease among the key's slots (a worker that died frees
its slot only then), at most SAFETY_SECONDS away, so even woken work that vanished
before it took its slot cannot leave the queue asleep.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from ..store import DueRow, Store
from .store import Waiter

# The longest the oldest held work of a key sleeps without a look at its key.
SAFETY_SECONDS = 60.0


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
        free, next_lease_end = store.flow.count_free(key, limit, now)
        store.flow.drop_dead_waiters(key)
        woken = store.flow.wake_heads(key, free, now) if free else []
        for item in woken:
            wait = (now - item.queued_at).total_seconds()
            store.flow.waits.append((item.waiter.workflow_name, max(0.0, wait)))
        passes = [w.waiter for w in woken if w.waiter.task_id is None]
        store.flow.due_tasks([w.waiter for w in woken if w.waiter.task_id is not None], now)
        due = store.flow.due_pending(passes, now)
        head = store.flow.next_head(key)
        if head is not None:
            at = now + timedelta(seconds=SAFETY_SECONDS)
            if next_lease_end is not None:
                at = min(at, next_lease_end)
            if head.task_id is None:
                store.flow.due_pending([head], at)
            else:
                store.flow.due_tasks([head], at)
    return due


def queue_on_one(
    store: Store,
    waiters: Sequence[Waiter],
    blocked: Sequence[Waiter],
    limits: dict[str, int],
    now: datetime,
) -> None:
    """Held work that needs several keys waits in one queue only: the first key (in key
    order) it could not have. It leaves the other keys' queues, so it never keeps a slot
    of one key promised (woken) while it waits for another, which would let two keys'
    waiters wait for each other for good. Each key it touched is looked at after the
    commit (a slot promised to it is free for the next)."""
    wait_on = min(blocked, key=lambda w: w.flow_key)
    others = [w for w in waiters if w.flow_key != wait_on.flow_key]
    if others:
        store.flow.admitted(others)  # leaves those queues
    store.flow.queue([wait_on], now)
    for waiter in waiters:
        store.flow.wakes[waiter.flow_key] = limits[waiter.flow_key]
