"""A task attempt takes its turn and its slots in its claim's transaction, and gives the
slots back with its outcome.

A task's limits ride on its row (`task_queue.flow`, keys resolved by the pass that
scheduled it): its step's own concurrency and throttle, and its workflow's concurrency
(a run running a task holds a slot of its workflow). At the claim, in order:

- throttle: the attempt reserves its turn (flow_limits, GCRA). A turn still ahead puts
  the row back, due at that turn, holding the turn (`flow_ticket`), so the attempt
  claimed then uses it without reserving another: arrival order, nothing dropped.
- concurrency: one slot per key is leased to the attempt (`holder` = tenant/task/attempt)
  until the claim's lease ends. A key with held work waiting gives its free slots to
  the woken first. Without a slot the row goes back, pending with no due time, queued;
  a slot that frees is handed over to it (flow/wake.py): the slot leased to its work,
  its row due now. The worker's loop claims it and the claim adopts the slot.

The outcome's transaction gives the attempt's slots back (only its own lease: a worker
whose lease ran out and was taken over frees nothing) and hands each to the attempt
first in its key's queue; work it cannot hand a slot to is looked at after the commit.
A worker that dies frees its slots when its lease ends, and so does an attempt that
never came for a slot handed to it: the next claim may take them, and the oldest held
work of the key has a timer for that moment (flow/wake.py).

Lock order: a claim holds task rows (the attempts it held back, up to
HOLDS_PER_TRANSACTION) and leases free slots SKIP LOCKED; a release or a look holds slot
locks and skips the task rows and waiters other transactions hold instead of waiting
for them. So a claim and a release (or a look) never wait for each other both ways. A
claim that leased a slot and gave it back (its other key had none) holds that slot's
row until it commits, so it commits before claiming again: adopting a handed slot a
look holds, it would wait for the look while the look waits for that row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from ..errors import TransientStoreError
from ..store import ClaimedTask, Store
from ..stream import NEVER
from .limits import LimitSpec
from .store import Waiter
from .wake import hand_on, queue_on_one, wake_after_commit

log = logging.getLogger("workflow_runner")

# Attempts a claim may hold back in one transaction before it commits and goes on.
HOLDS_PER_TRANSACTION = 200


def holder_of(task: ClaimedTask) -> str:
    """The lease name of one attempt's slots."""
    return f"{task.tenant_id}/{task.task_id}/{task.attempt}"


def claim_within_limits(
    store: Store, claim: Callable[[], ClaimedTask | None], now: Callable[[], datetime]
) -> ClaimedTask | None:
    """Claim the oldest due task whose limits admit its attempt now (None: nothing due).

    `claim` leases the next due task in the current transaction. Attempts held back go
    back to the queue in the same transaction; after each commit the keys they wait for
    are looked at again (a slot may have freed meanwhile)."""
    while True:
        held = 0
        admitted: ClaimedTask | None = None
        cut = False
        # The writes of an attempt held back (queued, parked) need no answer: they ride
        # the round trip of the next claim (one hot key's untried attempts are each
        # claimed once to be held back in arrival order).
        with store.transaction(), store.pipeline():
            store.flow.gave_back = False
            while held < HOLDS_PER_TRANSACTION:
                task = claim()
                if task is None or not task.limits or admit_task(store, task, now()):
                    admitted = task
                    break
                held += 1
                if store.flow.gave_back:
                    # It leased a slot of one key and gave it back (another key had
                    # none): that slot's row stays locked until this transaction ends,
                    # and a later attempt adopting a slot a look holds would wait for the
                    # look while the look waits for that row. Commit first.
                    cut = True
                    break
        if store.flow.wakes:
            try:
                wake_after_commit(store, now())
            except TransientStoreError:
                # The claim is committed: raising now would strand the admitted attempt
                # until its lease ends. The keys not looked at stay asked for; the
                # attempt's outcome looks again (the safety timer is the backstop).
                log.warning("a look after a claim failed; its keys stay asked for")
        if held < HOLDS_PER_TRANSACTION and not cut:
            return admitted


def admit_task(store: Store, task: ClaimedTask, now: datetime) -> bool:
    """Take a claimed attempt's turn and slots (see the module docstring); False when it
    was put back to wait."""
    specs = [LimitSpec.from_json(item) for item in task.limits or ()]
    throttles = [s for s in specs if s.kind == "throttle"]
    ticket = task.flow_ticket
    if throttles and (ticket is None or ticket > now):
        turn = max(store.flow.reserve_turn(spec, now) for spec in throttles)
        if turn > now:
            store.flow.waits.append((task.workflow_name, (turn - now).total_seconds()))
            store.flow.park_task(task.tenant_id, task.task_id, task.attempt, turn, turn)
            return False
        ticket = turn
    slots = [s for s in specs if s.kind == "concurrency"]
    if slots and not _take_slots(store, task, slots, ticket, now):
        return False
    if task.flow_ticket is not None:
        store.flow.use_ticket(task.tenant_id, task.task_id)
    return True


def _take_slots(
    store: Store,
    task: ClaimedTask,
    slots: list[LimitSpec],
    ticket: datetime | None,
    now: datetime,
) -> bool:
    waiters = [
        Waiter(
            s.flow_key,
            task.tenant_id,
            task.run_id,
            int(task.path[0]["i"]),
            f"task:{task.task_id}",
            task.workflow_name,
            s.priority,
        )
        for s in slots
    ]
    holder = holder_of(task)
    until = task.leased_until
    limits = {s.flow_key: s.limit for s in slots}
    # Woken work first adopts the slots a release or a look handed over to it, read
    # with its place in the queues in one round trip. This transaction holds task rows
    # (its claim, and the attempts it held back before), so it waits for no slot lock
    # but a look's (adopting its slot), and a look never waits for a task row or a
    # waiter (flow_hand_over skips them); free slots are leased SKIP LOCKED.
    state, leased = store.flow.queue_state_adopting(waiters, holder, until)
    # Keys where its work reads woken but it adopted no slot: the handover's lease had
    # ended (the slot went to another claim), and looks count it as promised until it
    # leaves the queue.
    stale = {w.flow_key for w, (_, mine) in zip(waiters, state, strict=True) if mine} - leased
    blocked = [w for w, (queued, mine) in zip(waiters, state, strict=True) if queued and not mine]
    if not blocked or leased:
        # An attempt woken with a slot handed to it takes a free slot of its other keys
        # even while work waits in their queues. Sent to the back of such a queue, it
        # would hand its slot back, and woken there it would find the first key's queue
        # waiting in turn: with both keys queued, no attempt ever held both (issue 34's
        # pair, 24,500 slots given back for 3,354 attempts in one minute). A slot free
        # while a key's queue waits is one its release could not hand over (the head's
        # row held by a claim); its look would give it to the queue otherwise.
        wanted = {k: v for k, v in limits.items() if k not in leased}
        if wanted:
            leased |= store.flow.lease_slots(wanted, holder, until, now)
        if len(leased) < len(limits):
            store.flow.ensure_slots([s for s in slots if s.flow_key not in leased], now)
            missing = {k: v for k, v in limits.items() if k not in leased}
            leased |= store.flow.lease_slots(missing, holder, until, now)
        blocked = [w for w in waiters if w.flow_key not in leased]
    if blocked:
        if leased:
            give_back(store, holder, limits, now)
            store.flow.gave_back = True
        queue_on_one(store, waiters, blocked, limits, now, promised=stale)
        # Its turn (if it reserved one) stays with it for when a slot wakes it.
        store.flow.park_task(task.tenant_id, task.task_id, task.attempt, NEVER, ticket)
        return False
    queued_here = [w for w, (_, mine) in zip(waiters, state, strict=True) if mine is not None]
    if queued_here:
        store.flow.admitted(queued_here)
    return True


def release_task_slots(store: Store, task: ClaimedTask, now: datetime) -> None:
    """Give back the slots of a task's attempt that ended, in its outcome's transaction,
    handing each to the attempt first in its key's queue (`give_back`). Called as the
    transaction's last statements: the outcome's writes, held back by the caller's
    pipeline, ride the release's round trip, and the slot rows are locked only from
    there to the commit (a look counting the key's slots, or a claim adopting one,
    waits that much less)."""
    if not task.limits:
        return
    limits = {
        spec.flow_key: spec.limit
        for spec in map(LimitSpec.from_json, task.limits)
        if spec.kind == "concurrency"
    }
    give_back(store, holder_of(task), limits, now)


def give_back(store: Store, holder: str, limits: dict[str, int], now: datetime) -> None:
    """Free `holder`'s slots and hand each to held work of its key, in key order (the
    order every statement that locks slots takes them); keys with work left to wake are
    looked at after the commit (`wake_after_commit`)."""
    for key, (slots, queued) in sorted(store.flow.release_slots(holder).items()):
        if queued and key in limits:
            hand_on(store, key, limits[key], slots, now)


def wait_for_turn(
    store: Store,
    now: Callable[[], datetime],
    seconds_left: Callable[[], float],
    wait: Callable[[float], None],
) -> bool:
    """Wait for the next throttle turn of a task attempt if it comes within the time
    left (a deployed worker: nothing else would run the attempt before the next
    invocation); False when there is none that soon."""
    turn = store.flow.next_turn(now())
    if turn is None:
        return False
    pause = (turn - now()).total_seconds()
    if not 0 < pause < seconds_left():
        return False
    wait(pause)
    return True
