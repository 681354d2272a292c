"""A batch wakeup and the pending projection creating the waiting row it would match
(invariant 5, no lost wakeup), in both orders around the (tenant, type) lock.

Each order is arranged on real PostgreSQL by running the other side, on a connection of
its own, just before one side takes the lock: the batch's events are committed then, so
whichever side reads second sees the other's part. The run is woken exactly once, and
the batch's enqueue sends it whoever matched it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from workflow_runner import DomainEvent, Event, ManualClock, define_workflow, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.aws.inprocess import InMemoryResumeQueue
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine import projection
from workflow_runner.engine.inbox_writes import store_inbox_events
from workflow_runner.match import eq
from workflow_runner.store import Store, connect

from tests.support import TENANT_A, event

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SALE = T0 + timedelta(minutes=5)


def _registry() -> WorkflowRegistry:
    registry = WorkflowRegistry()
    registry.register(
        define_workflow(
            name="pay",
            trigger=on_event("order.placed"),
            idempotency_key=lambda e: e.payload["order"],
            awaits={"paid": "order.paid"},
            register=False,
            steps=lambda s: [
                s.wait_for_event(
                    "order.paid", match=eq("order", Event.payload["order"]), timeout="P1D"
                )
            ],
        )
    )
    return registry


def _before_first_lock(
    store: Store, monkeypatch: pytest.MonkeyPatch, then: Callable[[], Any]
) -> None:
    """Run `then` once, just before `store` takes its first (tenant, type) lock: the
    projection's InboxStore.lock_type, which goes out with the look-back's read after
    it, or the wakeup's PendingStore.locked_waiting_for, the lock and the reads that
    follow it in one round trip."""
    pending = [then]

    def first(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            while pending:
                pending.pop()()
            return real(*args)

        return call

    monkeypatch.setattr(store.inbox, "lock_type", first(store.inbox.lock_type))
    monkeypatch.setattr(
        store.pending, "locked_waiting_for", first(store.pending.locked_waiting_for)
    )


def _matched(store: Store, run_id: str) -> list[str]:
    return [
        e.payload["eventId"]
        for e in store.streams.load(TENANT_A, run_id)
        if e.type == ev.STEP_EVENT_MATCHED
    ]


@pytest.mark.parametrize("second", ["batch-reads-second", "projection-reads-second"])
def test_a_batch_wakeup_and_a_new_waiting_row_never_miss_each_other(
    store: Store, db_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, second: str
) -> None:
    registry = _registry()
    ops.ingest_domain_event(store, event("order.placed", {"order": "o1"}), T0, registry)
    run_id = run_id_for("pay", "o1")  # suspended on its stream, no waiting row yet
    batch = [
        DomainEvent("paid-o1", "order.paid", {"order": "o1"}, TENANT_A, SALE, "shop"),
        DomainEvent("paid-o2", "order.paid", {"order": "o2"}, TENANT_A, SALE, "shop"),
    ]
    queue = InMemoryResumeQueue(clock)
    clock.set(SALE)
    other = connect(db_url)
    try:
        if second == "batch-reads-second":
            # The batch's events are committed; the projection writes the row and looks
            # back (finding paid-o1) before the batch takes the lock and reads.
            _before_first_lock(store, monkeypatch, lambda: ops.project_pending(other, SALE))
            result = ops.wake_and_enqueue_many(store, queue, batch, SALE)
            assert [m.woken for m in result.events] == [[], []]  # the look-back took it
        else:
            # The projection is about to write the row; the whole batch runs first and
            # finds no waiting row.
            result_box: list[Any] = []
            _before_first_lock(
                store,
                monkeypatch,
                lambda: result_box.append(ops.wake_and_enqueue_many(other, queue, batch, SALE)),
            )
            projected = ops.project_pending(store, SALE)
            assert [m.woken for m in result_box[0].events] == [[], []]
            assert [w.run_id for w in projected.woken] == [run_id]  # the look-back took it
            ops.enqueue_due(store, queue, projected.woken, SALE)  # as PendingProjection
    finally:
        other.close()
    assert _matched(store, run_id) == ["paid-o1"]  # woken, exactly once
    assert [r.run_id for r in queue.sent] == [run_id]


@pytest.mark.parametrize(
    "order", ["batch-reads-second", "projection-reads-second", "stored-after-read-ahead"]
)
def test_a_batch_wakeup_and_a_batch_of_new_waits_read_ahead_never_miss_each_other(
    store: Store, db_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, order: str
) -> None:
    """Two new waits in one projection batch read their look-backs ahead, together
    (lookback.read_ahead), before either row is written. In every order, each run is
    woken exactly once: by the look-back when the events were stored before the read,
    by the wakeup when they were stored after it (its read of the waits waits for the
    projection's locks, so it sees both rows)."""
    registry = _registry()
    for order_id in ("o1", "o2"):
        ops.ingest_domain_event(store, event("order.placed", {"order": order_id}), T0, registry)
    runs = [run_id_for("pay", o) for o in ("o1", "o2")]
    batch = [
        DomainEvent(f"paid-{o}", "order.paid", {"order": o}, TENANT_A, SALE, "shop")
        for o in ("o1", "o2")
    ]
    queue = InMemoryResumeQueue(clock)
    clock.set(SALE)
    other = connect(db_url)
    try:
        if order == "batch-reads-second":
            _before_first_lock(store, monkeypatch, lambda: ops.project_pending(other, SALE))
            result = ops.wake_and_enqueue_many(store, queue, batch, SALE)
            assert [m.woken for m in result.events] == [[], []]  # the look-backs took them
        elif order == "projection-reads-second":
            result_box: list[Any] = []
            _before_first_lock(
                store,
                monkeypatch,
                lambda: result_box.append(ops.wake_and_enqueue_many(other, queue, batch, SALE)),
            )
            projected = ops.project_pending(store, SALE)
            assert [m.woken for m in result_box[0].events] == [[], []]
            assert sorted(w.run_id for w in projected.woken) == sorted(runs)
            ops.enqueue_due(store, queue, projected.woken, SALE)
        else:
            real = projection.read_ahead

            read: list[int] = []

            def then_store(*args: Any) -> Any:
                pages = real(*args)
                read.append(len(pages))
                with other.transaction(), other.pipeline():
                    store_inbox_events(other, batch, SALE)  # the wakeup's first step
                return pages

            monkeypatch.setattr(projection, "read_ahead", then_store)
            projected = ops.project_pending(store, SALE)
            assert read == [2] and projected.woken == []  # read before they were stored
            result = ops.wake_and_enqueue_many(other, queue, batch, SALE)
            assert sorted(w.run_id for m in result.events for w in m.woken) == sorted(runs)
    finally:
        other.close()
    for run_id, order_id in zip(runs, ("o1", "o2"), strict=True):
        assert _matched(store, run_id) == [f"paid-{order_id}"]  # woken, exactly once
    assert sorted(r.run_id for r in queue.sent) == sorted(runs)
