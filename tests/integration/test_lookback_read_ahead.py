"""A projection batch's new waits read their look-backs' first rows together
(lookback.read_ahead, one statement after their locks), on real PostgreSQL: the waits
take what each one's own read at its turn would have given them (keyed waits, a wait
without a key, rows stored without keys, a run's consumed event, a spent budget), and
the batch sends that one read instead of one per wait."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import pytest
from workflow_runner import DomainEvent, Event, define_workflow, on_event
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine import projection
from workflow_runner.engine.inbox_writes import store_inbox_event
from workflow_runner.match import eq
from workflow_runner.store import Sql, Store, connect
from workflow_runner.store.sql import _Queued

from tests.support import TENANT_A

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


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
    registry.register(
        define_workflow(
            name="audit",
            trigger=on_event("audit.start"),
            idempotency_key=lambda e: e.payload["id"],
            awaits={"paid": "order.paid"},
            register=False,
            steps=lambda s: [s.wait_for_event("order.paid", timeout="P1D")],
        )
    )
    return registry


def _paid(order: str, minutes: int) -> DomainEvent:
    at = T0 + timedelta(minutes=minutes)
    return DomainEvent(f"paid-{order}", "order.paid", {"order": order}, TENANT_A, at, "shop")


class _RoundTripSql(Sql):
    """Sql that records the statements of each round trip it sends."""

    trips: ClassVar[list[list[str]]] = []

    def _send(self, statements: Sequence[_Queued]) -> None:
        _RoundTripSql.trips.append([s.sql for s in statements])
        super()._send(statements)


def _matched(store: Store) -> dict[str, str]:
    rows = store.conn.execute(
        "SELECT stream_id::text AS run_id, payload ->> 'eventId' AS event_id FROM wf_events"
        " WHERE type = %s",
        (ev.STEP_EVENT_MATCHED,),
    ).fetchall()
    return {r["run_id"]: r["event_id"] for r in rows}


@pytest.mark.parametrize("budget", [None, 2])
@pytest.mark.parametrize("ahead", ["read-ahead", "each-at-its-turn"])
def test_a_batchs_new_waits_take_what_their_own_reads_would_give_them(
    store: Store,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    budget: int | None,
    ahead: str,
) -> None:
    registry = _registry()
    # Stored before the waits: paid o1 and o3 (keyed), o9 (nobody's), and o5's paid
    # stored without keys (as release 0.1.0 stored events), which a keyed wait reads too.
    for order, minutes in (("o1", 1), ("o3", 2), ("o9", 3)):
        store_inbox_event(store, _paid(order, minutes), T0)
    store_inbox_event(store, _paid("o5", 4), T0)
    store.conn.execute("UPDATE inbox SET match_keys = NULL WHERE event_id = 'paid-o5'")
    placed = [
        DomainEvent(f"p{o}", "order.placed", {"order": o}, TENANT_A, T0, "shop")
        for o in ("o1", "o2", "o3", "o4", "o5")
    ]
    runs = {
        o.payload["order"]: r.started[0].run_id
        for o, r in zip(placed, ops.ingest_domain_events(store, placed, T0, registry), strict=True)
    }
    audit = (
        ops.ingest_domain_event(
            store, DomainEvent("a1", "audit.start", {"id": "a1"}, TENANT_A, T0, "ops"), T0, registry
        )
        .started[0]
        .run_id
    )
    if ahead == "each-at-its-turn":
        monkeypatch.setattr(projection, "read_ahead", lambda _s, starts, _b: [None] * len(starts))

    logged = connect(db_url, sql_type=_RoundTripSql)
    _RoundTripSql.trips = []
    try:
        ops.project_pending(logged, T0 + timedelta(minutes=10), look_back_budget=budget)
    finally:
        logged.close()

    assert _matched(store) == {
        runs["o1"]: "paid-o1",
        runs["o3"]: "paid-o3",
        runs["o5"]: "paid-o5",
        audit: "paid-o1",  # no key: the first paid event stored
    }
    rows = store.conn.execute(
        "SELECT run_id::text AS run_id, awaited_event_id, lookback_after_position"
        " FROM workflow_run_pending"
    ).fetchall()
    assert {r["run_id"]: r["awaited_event_id"] for r in rows} == {
        runs["o1"]: "paid-o1",
        runs["o2"]: None,
        runs["o3"]: "paid-o3",
        runs["o4"]: None,
        runs["o5"]: "paid-o5",
        audit: "paid-o1",
    }
    assert all(r["lookback_after_position"] is None for r in rows)  # every look-back done
    reads = [t for trip in _RoundTripSql.trips for t in trip if "FROM inbox" in t]
    if ahead == "read-ahead" and budget is None:
        # One read for the six waits' look-backs, none at their turns.
        assert len(reads) == 1 and "jsonb_to_recordset(%(waits)s)" in reads[0]


def test_a_wait_never_takes_from_the_read_ahead_an_event_its_run_consumed(
    store: Store, db_url: str
) -> None:
    """A run whose earlier wait took paid-x waits again: the read-ahead leaves
    paid-x out for it (run_consumed_events), as its own read would."""
    registry = WorkflowRegistry()
    registry.register(
        define_workflow(
            name="twice",
            trigger=on_event("order.placed"),
            idempotency_key=lambda e: e.payload["order"],
            awaits={"paid": "order.paid"},
            register=False,
            steps=lambda s: [
                s.wait_for_event("order.paid", timeout="P1D", result_key="first"),
                s.wait_for_event("order.paid", timeout="P1D", result_key="second"),
            ],
        )
    )
    store_inbox_event(store, _paid("x", 1), T0)
    placed = [
        DomainEvent(f"p{o}", "order.placed", {"order": o}, TENANT_A, T0, "shop") for o in ("a", "b")
    ]
    started = ops.ingest_domain_events(store, placed, T0, registry)
    first, second = (r.started[0].run_id for r in started)
    later = T0 + timedelta(minutes=5)
    woken = ops.project_pending(store, later).woken
    assert sorted(w.run_id for w in woken) == sorted([first, second])
    for run_id in (first, second):
        ops.resume_run(store, TENANT_A, run_id, 0, later, registry=registry)
    store_inbox_event(store, _paid("y", 6), T0)

    ops.project_pending(store, later)  # both second waits in one batch: read ahead

    rows = store.conn.execute(
        "SELECT awaited_event_id FROM workflow_run_pending ORDER BY run_id"
    ).fetchall()
    assert [r["awaited_event_id"] for r in rows] == ["paid-y", "paid-y"]
