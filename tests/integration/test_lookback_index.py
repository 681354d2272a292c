"""A new wait's look-back reads the inbox by index and within a budget (issue 11,
item 3): with 100k stored events of the awaited type it touches a handful of rows, and
a look-back that runs out of budget is continued by the next projection batches while
each batch commits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from workflow_runner import DomainEvent, define_workflow, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine.erase import erase_event
from workflow_runner.engine.inbox_writes import store_inbox_event
from workflow_runner.match import inbox_keys
from workflow_runner.store import Store, connect
from workflow_runner.store.queries import query

from tests.support import TENANT_A, stream_types

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
REACHED = T0 + timedelta(days=1)  # the wait step is reached after a one-day timer


def _order_match(ctx: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "expr": {
            "kind": "atom",
            "path": ["orderId"],
            "op": {"kind": "eq", "value": ctx.event.payload["orderId"]},
        },
    }


def _big_amount(ctx: Any) -> dict[str, Any]:  # no equality atom: no key
    return {
        "version": 1,
        "expr": {"kind": "atom", "path": ["amount"], "op": {"kind": "gte", "value": 10**9}},
    }


def _register(registry: WorkflowRegistry, match: Any = _order_match) -> None:
    registry.register(
        define_workflow(
            name="late-approval",
            trigger=on_event("order.placed"),
            idempotency_key=lambda e: e.payload["orderId"],
            awaits={"approved": "order.approved"},
            register=False,
            steps=lambda s: [
                s.wait(for_="P1D"),
                s.wait_for_event(event="order.approved", match=match, timeout="P3D"),
                s.return_(lambda ctx: {"approval": ctx.steps["order.approved"]}),
            ],
        )
    )


def _approval(i: int, order: str | None = None, amount: int = 1) -> dict[str, Any]:
    return {"orderId": order or f"o{i}", "amount": amount}


def _copy_approvals(store: Store, n: int, keyed: bool = True) -> None:
    """n stored approvals of other orders, as the engine stores them (keys included),
    or as release 0.1.0 stored them (no keys)."""
    with store.conn.cursor().copy(
        "COPY inbox (tenant_id, event_id, source, type, detail, event_time, received_at,"
        " match_keys) FROM STDIN"
    ) as copy:
        for i in range(n):
            at = T0 + timedelta(hours=1, milliseconds=i)
            detail = _approval(i)
            keys = inbox_keys(detail) if keyed else None
            copy.write_row(
                (TENANT_A, f"a{i}", "shop", "order.approved", json.dumps(detail), at, at, keys)
            )
    store.conn.execute("ANALYZE inbox")


def _placed(order: str) -> DomainEvent:
    return DomainEvent(f"placed-{order}", "order.placed", {"orderId": order}, TENANT_A, T0, "shop")


def _approved(event_id: str, detail: dict[str, Any], at: datetime) -> DomainEvent:
    return DomainEvent(event_id, "order.approved", detail, TENANT_A, at, "shop")


def _start(store: Store, registry: WorkflowRegistry, order: str) -> str:
    ops.ingest_domain_event(store, _placed(order), T0, registry)
    ops.project_pending(store, T0)
    return run_id_for("late-approval", order)


def _reach_the_wait(store: Store, registry: WorkflowRegistry, run_id: str) -> None:
    ops.resume_run(store, TENANT_A, run_id, 0, REACHED, registry=registry)


@pytest.fixture
def monitor(db_url: str) -> Iterator[Store]:
    s = connect(db_url)
    yield s
    s.close()


def _inbox_rows_read(store: Store, monitor: Store) -> int:
    """Rows of inbox the store's session has read so far (sequential and index scans)."""
    store.conn.execute("SELECT pg_stat_force_next_flush()")
    store.conn.execute("SELECT 1")  # the flush happens once the session is idle
    row = monitor.conn.execute(
        "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) AS n"
        " FROM pg_stat_user_tables WHERE relname = 'inbox'"
    ).fetchone()
    assert row is not None
    return int(row["n"])


def test_a_new_waits_look_back_over_100k_stored_events_reads_a_handful(
    store: Store, registry: WorkflowRegistry, monitor: Store
) -> None:
    _register(registry)
    _copy_approvals(store, 100_000)
    run_id = _start(store, registry, "o-wanted")
    with store.pipeline():
        store_inbox_event(
            store, _approved("wanted", _approval(0, "o-wanted"), T0 + timedelta(hours=2)), T0
        )
    _reach_the_wait(store, registry, run_id)

    before = _inbox_rows_read(store, monitor)
    woken = ops.project_pending(store, REACHED).woken
    read = _inbox_rows_read(store, monitor) - before

    assert [(w.run_id, w.event_id) for w in woken] == [(run_id, "wanted")]
    assert read < 20, f"the look-back read {read} inbox rows"
    # The plan behind it, as a prepared statement gets it: the key index, no scan.
    params = {
        "tenant_id": TENANT_A,
        "run_id": run_id,
        "type": "order.approved",
        "key": '[["orderId"],"o77777"]',
        "after_instant": T0,
        "after_position": 0,
        "exclude": [],
        "limit": 200,
    }
    store.conn.execute("SET plan_cache_mode = force_generic_plan")
    plan = "\n".join(
        r["QUERY PLAN"]
        for r in store.conn.execute("EXPLAIN " + query("lookback_keyed"), params).fetchall()
    )
    assert "inbox_match_keys_idx" in plan and "Seq Scan" not in plan, plan


def _key_index_pages_read(store: Store, key: str) -> int:
    """Pages of inbox_match_keys_idx one search for `key` (or '*') reads, as the keyed
    look-back searches it."""
    store.conn.execute("SET enable_seqscan = off")
    store.conn.execute("SET enable_indexscan = off")  # the key index, not the range
    try:
        row = store.conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT event_id FROM inbox"
            " WHERE match_keys && ARRAY[%s, '*']::text[]",
            [key],
        ).fetchone()
    finally:
        store.conn.execute("RESET enable_seqscan")
        store.conn.execute("RESET enable_indexscan")
    assert row is not None

    def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield node
        for child in node.get("Plans", []):
            yield from nodes(child)

    (scan,) = [
        n
        for n in nodes(row["QUERY PLAN"][0]["Plan"])
        if n.get("Index Name") == "inbox_match_keys_idx"
    ]
    return int(scan["Shared Hit Blocks"]) + int(scan["Shared Read Blocks"])


def test_a_key_search_reads_a_few_pages_however_many_events_wait_for_a_vacuum(
    store: Store,
) -> None:
    """No pending list in the key index (0020): with one, every search read every entry
    stored since inbox's last vacuum (20,000 events: 161 pages a search here; 50,000
    new waits' look-backs took 371 s instead of 7 in the bench's broadcast set-up)."""
    _copy_approvals(store, 20_000)  # ANALYZE does not empty a pending list; a vacuum would
    read = _key_index_pages_read(store, '[["orderId"],"o-nobody"]')
    assert read <= 8, f"one key search read {read} pages of the key index"


def test_the_engine_stores_the_keys_each_event_offers_and_the_look_back_uses_them(
    store: Store, registry: WorkflowRegistry
) -> None:
    _register(registry)
    run_id = _start(store, registry, "o-engine")
    crowded = {**_approval(0, "o-engine"), "lines": {f"l{i}": i for i in range(600)}}
    ops.wake_on_event(store, _approved("other", _approval(1), T0), T0)  # nobody waits yet
    ops.wake_on_event(store, _approved("crowded", crowded, T0), T0)
    keys = {
        r["event_id"]: r["match_keys"]
        for r in store.conn.execute("SELECT event_id, match_keys FROM inbox").fetchall()
    }
    assert keys["other"] == inbox_keys(_approval(1))
    assert '[["orderId"],"o1"]' in keys["other"]
    assert keys["crowded"] == ["*"]  # over 512 leaves: it may offer any key
    _reach_the_wait(store, registry, run_id)
    assert [w.event_id for w in ops.project_pending(store, REACHED).woken] == ["crowded"]


def test_rows_stored_without_keys_by_release_0_1_are_still_found(
    store: Store, registry: WorkflowRegistry
) -> None:
    _register(registry)
    _copy_approvals(store, 500, keyed=False)  # o0 .. o499, as 0.1.0 stored them
    run_id = _start(store, registry, "o321")
    _reach_the_wait(store, registry, run_id)
    assert [w.event_id for w in ops.project_pending(store, REACHED).woken] == ["a321"]


def test_a_look_back_out_of_budget_is_continued_by_the_next_batches(
    store: Store, registry: WorkflowRegistry
) -> None:
    """A wait without an equality key must examine every stored event of its type: 350
    of them, with a budget of 100 per batch. Each batch commits; none is repeated."""
    _register(registry, match=_big_amount)
    _copy_approvals(store, 349)
    with store.pipeline():
        store_inbox_event(
            store, _approved("big", _approval(0, "x", 10**9), T0 + timedelta(hours=3)), T0
        )
    run_id = _start(store, registry, "o-budget")
    _reach_the_wait(store, registry, run_id)

    first = ops.project_pending(store, REACHED, max_batches=1, look_back_budget=100)
    assert first.applied == 2 and first.woken == []  # resumed + waiting: the batch committed
    (row,) = store.pending.for_tenant(TENANT_A)
    assert row.awaited_event_id is None
    woken = []
    for _ in range(5):
        woken += ops.project_pending(store, REACHED, max_batches=1, look_back_budget=100).woken
    assert [w.event_id for w in woken] == ["big"]
    assert stream_types(store, run_id).count(ev.STEP_EVENT_MATCHED) == 1
    assert store.pending.unfinished_lookbacks(10) == []


def test_an_event_arriving_while_a_look_back_is_unfinished_wakes_the_wait(
    store: Store, registry: WorkflowRegistry
) -> None:
    _register(registry, match=_big_amount)
    _copy_approvals(store, 1000)
    run_id = _start(store, registry, "o-race")
    _reach_the_wait(store, registry, run_id)
    ops.project_pending(store, REACHED, max_batches=1, look_back_budget=100)
    assert len(store.pending.unfinished_lookbacks(10)) == 1
    late = _approved("late", _approval(0, "y", 10**9), REACHED + timedelta(minutes=1))
    assert [w.run_id for w in ops.wake_on_event(store, late, REACHED)] == [run_id]
    assert store.pending.unfinished_lookbacks(10) == []  # the match ended the look-back
    assert ops.project_pending(store, REACHED).woken == []


def test_erasing_an_event_erases_the_keys_derived_from_it(store: Store) -> None:
    event = _approved("secret", _approval(0, "o-secret"), T0)
    with store.pipeline():
        store_inbox_event(store, event, T0)
    erase_event(store, TENANT_A, "secret", T0)
    row = store.conn.execute(
        "SELECT match_keys, detail FROM inbox WHERE event_id = 'secret'"
    ).fetchone()
    assert row == {"match_keys": [], "detail": None}


def test_the_no_transaction_migration_can_run_again_after_an_interruption(db_url: str) -> None:
    from workflow_runner.store import apply_migrations

    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("DELETE FROM schema_migrations WHERE version = 6")
        conn.execute("DROP INDEX inbox_match_keys_idx")  # as if interrupted half way
        applied = apply_migrations(conn)  # type: ignore[arg-type]
        assert [m.version for m in applied] == [6]
        names = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes")}
        assert {"inbox_match_keys_idx", "inbox_lookback_idx"} <= names


def test_a_projection_out_of_time_stops_between_batches_and_the_next_call_continues(
    store: Store, registry: WorkflowRegistry
) -> None:
    _register(registry)
    for i in range(5):
        ops.ingest_domain_event(store, _placed(f"t{i}"), T0, registry)  # started + waiting
    ticks = iter([0.0, 100.0])
    first = ops.project_pending(
        store, T0, batch_size=2, budget_seconds=10, monotonic=lambda: next(ticks, 100.0)
    )
    assert (first.applied, first.lag_events) == (2, 8)
    second = ops.project_pending(store, T0)
    assert (second.applied, second.lag_events) == (8, 0)
