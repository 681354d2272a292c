"""One writer wins: concurrent resumes, triggers and wakeups on real PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from workflow_runner import ManualClock, define_workflow, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.store import Store, connect

from tests.support import TENANT_A, event, stream_types, trigger


def _in_parallel(db_url: str, n: int, work: Callable[[Store, int], Any]) -> list[Any]:
    """Run `work` on n threads, each with its own connection, released together."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        store = connect(db_url)
        try:
            barrier.wait()
            results[i] = work(store, i)
        except BaseException as error:
            results[i] = error
        finally:
            store.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_twenty_concurrent_resumes_of_one_suspension_append_exactly_one_resumed(
    store: Store, db_url: str, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    wf = define_workflow(
        name="race",
        trigger=on_event("race.go"),
        idempotency_key="k",
        register=False,
        steps=lambda s: [
            s.wait(for_="PT1M"),
            s.mail_send(to="a@example.com", subject="s", body="b"),
        ],
    )
    registry.register(wf)
    trigger(store, registry, "race.go", {}, clock.now())
    run_id = run_id_for("race", "k")
    later = clock.now() + timedelta(minutes=1)

    outcomes = _in_parallel(
        db_url,
        20,
        lambda s, i: ops.resume_run(s, TENANT_A, run_id, 0, later, registry=registry).outcome,
    )

    assert sorted(outcomes, key=str) == sorted(["completed"] + ["already-resumed"] * 19)
    assert stream_types(store, run_id).count(ev.STEP_RESUMED) == 1
    mails = store.conn.execute("SELECT count(*) AS n FROM dispatch_outbox").fetchone()
    assert mails is not None and mails["n"] == 1


def test_twenty_concurrent_triggers_with_one_idempotency_key_start_one_run(
    store: Store, db_url: str, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    wf = define_workflow(
        name="once",
        trigger=on_event("once.go"),
        idempotency_key=lambda e: e.payload["k"],
        register=False,
        steps=lambda s: [s.wait(for_="PT1M")],
    )
    registry.register(wf)

    results = _in_parallel(
        db_url,
        20,
        lambda s, i: ops.ingest_domain_event(
            s, event("once.go", {"k": "same"}), clock.now(), registry
        ),
    )

    assert not [r for r in results if isinstance(r, BaseException)]
    assert sum(len(r.started) for r in results) == 1
    assert stream_types(store, run_id_for("once", "same")) == [ev.RUN_STARTED, ev.STEP_WAITING]
    assert len(store.runs.for_tenant(TENANT_A)) == 1


def test_awaited_events_racing_new_waits_are_never_lost(
    store: Store, db_url: str, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    """Each order's approval is sent at the same moment as the pending projection runs."""
    wf = define_workflow(
        name="approve",
        trigger=on_event("order.placed"),
        idempotency_key=lambda e: e.payload["orderId"],
        awaits={"ok": "order.approved"},
        register=False,
        steps=lambda s: [
            s.wait_for_event(
                event="order.approved",
                timeout="P1D",
                match=lambda ctx: {
                    "version": 1,
                    "expr": {
                        "kind": "atom",
                        "path": ["orderId"],
                        "op": {"kind": "eq", "value": ctx.event.payload["orderId"]},
                    },
                },
            ),
        ],
    )
    registry.register(wf)
    orders = [f"o{i}" for i in range(40)]
    for order in orders:
        ops.ingest_domain_event(
            store, event("order.placed", {"orderId": order}), clock.now(), registry
        )

    def work(s: Store, i: int) -> Any:
        if i == 0:
            for _ in range(20):
                ops.project_pending(s, clock.now(), batch_size=3)
            return None
        for order in orders[(i - 1) :: 3]:
            ops.wake_on_event(s, event("order.approved", {"orderId": order}), clock.now())
        return None

    results = _in_parallel(db_url, 4, work)
    assert not [r for r in results if isinstance(r, BaseException)]
    ops.project_pending(store, clock.now())
    rows = store.pending.for_tenant(TENANT_A)
    assert len(rows) == len(orders)
    assert all(r.awaited_event_id is not None for r in rows), "an approval was lost"
    for order in orders:
        assert stream_types(store, run_id_for("approve", order)).count(ev.STEP_EVENT_MATCHED) == 1
