"""A pending-projection batch writes its runs' new rows, and records their matches, in
one statement each, on real PostgreSQL: the rows are what one statement per event
wrote, and a run that resumed within the same batch has none."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from workflow_runner import DomainEvent
from workflow_runner.engine import (
    ResumeRequestItem,
    ingest_domain_events,
    project_pending,
    resume_runs,
    wake_on_event,
)
from workflow_runner.store import NewPendingRow, Sql, Store, connect
from workflow_runner.store.sql import _Queued

from bench.common import TENANT, bench_registry, sleep_event

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class _LoggedSql(Sql):
    def __init__(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        super().__init__(conn)
        self.texts: list[str] = []

    def _send(self, statements: Sequence[_Queued]) -> None:
        self.texts += [s.sql for s in statements]
        super()._send(statements)


def test_a_batchs_suspensions_are_one_statement_and_a_resumed_run_has_no_row(
    db_url: str, store: Store
) -> None:
    registry = bench_registry()
    events = [sleep_event(f"p{i}", f"p{i}", i) for i in range(6)]
    started = ingest_domain_events(store, events, NOW, registry)
    runs = [r.started[0].run_id for r in started]
    # One run wakes and completes before the projection sees any of it.
    later = NOW + timedelta(seconds=2)
    (done,) = resume_runs(store, [ResumeRequestItem(TENANT, runs[0], 1)], later, registry)
    assert done.outcome == "completed"

    logged = connect(db_url, sql_type=_LoggedSql)
    try:
        project_pending(logged, later)
        texts = logged._sql.texts  # type: ignore[attr-defined]
    finally:
        logged.close()

    assert sum("INSERT INTO workflow_run_pending" in t for t in texts) == 1
    rows = {p.run_id: p for p in store.pending.for_tenant(TENANT)}
    assert set(rows) == set(runs[1:])
    assert {p.wake_at for p in rows.values()} == {NOW + timedelta(seconds=1)}


def test_a_wait_whose_match_has_a_none_key_is_written(store: Store) -> None:
    """Such a match sends the row's record through json.dumps (database._to_json), which
    must still encode the record's instants."""
    row = NewPendingRow(
        tenant_id=TENANT,
        run_id="0b0e0c0d-0000-4000-8000-000000000001",
        step_index=1,
        workflow_name="w",
        suspension_event_type="workflow.step.waiting-for-event",
        wake_at=NOW + timedelta(days=1),
        retry_attempt=None,
        definition_fingerprint=None,
        wait_event_type="sale",
        match_expr={"None": 1},
        suspension_version=2,
        lookback_from=NOW,
        match_key=None,
        consumed_event_ids=("e1",),
        lookback_after=(NOW + timedelta(microseconds=5), 7),
    )
    with store.transaction():
        store.pending.upsert(row)
    (written,) = store.pending.for_tenant(TENANT)
    assert written.wake_at == NOW + timedelta(days=1)
    assert written.match_expr == {"None": 1}


def _projected_texts(db_url: str, now: datetime) -> list[str]:
    logged = connect(db_url, sql_type=_LoggedSql)
    try:
        project_pending(logged, now)
        return list(logged._sql.texts)  # type: ignore[attr-defined]
    finally:
        logged.close()


def test_a_batchs_matches_are_one_statement_and_keep_or_free_leases_as_each_would(
    db_url: str, store: Store
) -> None:
    registry = bench_registry()
    starts = [
        DomainEvent(id=f"s{i}", type="bench.await-start", payload={"id": f"m{i}"}, tenant_id=TENANT)
        for i in range(4)
    ]
    runs = [r.started[0].run_id for r in ingest_domain_events(store, starts, NOW, registry)]
    project_pending(store, NOW)
    woke = NOW + timedelta(seconds=5)
    for i in range(3):
        go = DomainEvent(id=f"go{i}", type="bench.go", payload={"id": f"m{i}"}, tenant_id=TENANT)
        assert [w.run_id for w in wake_on_event(store, go, woke)] == [runs[i]]
    # Runs 0 and 1: leased and sent since (the replay must not free them for a second
    # send); run 2: a row that lost its match (as one projected after it): taken again.
    lease = woke + timedelta(minutes=20)
    store.conn.execute(
        "UPDATE workflow_run_pending SET leased_until = %s WHERE run_id = ANY(%s::uuid[])",
        (lease, runs[:3]),
    )
    store.conn.execute(
        "UPDATE workflow_run_pending SET awaited_event_id = NULL WHERE run_id = %s::uuid",
        (runs[2],),
    )

    texts = _projected_texts(db_url, woke)

    assert (
        sum("FROM jsonb_to_recordset" in t and "awaited_event_id = m.event_id" in t for t in texts)
        == 1
    )
    assert not any("WHERE tenant_id = %(tenant_id)s AND run_id = %(run_id)s" in t for t in texts)
    rows = {p.run_id: p for p in store.pending.for_tenant(TENANT)}
    marked = {
        r["run_id"]: (r["awaited_event_id"], r["leased_until"])
        for r in store.conn.execute(
            "SELECT run_id::text AS run_id, awaited_event_id, leased_until"
            " FROM workflow_run_pending"
        ).fetchall()
    }
    assert set(rows) == set(runs)
    assert marked[runs[0]] == ("go0", lease) and marked[runs[1]] == ("go1", lease)
    assert marked[runs[2]] == ("go2", None)  # matched anew: free for the wakeup to send
    assert marked[runs[3]] == (None, None)
    assert all(rows[r].wake_at <= woke for r in runs[:3])


def test_a_store_on_a_plain_connection_encodes_its_batch_records_instants(db_url: str) -> None:
    """The engine's jsonb encoding comes with the Store, not only with connect(): a timer's
    row (its instants inside the batch's JSON record) is written on any connection."""
    from psycopg.rows import dict_row

    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        plain = Store(conn)
        row = NewPendingRow(
            tenant_id=TENANT,
            run_id="00000000-0000-4000-8000-0000000000c1",
            step_index=1,
            workflow_name="w",
            suspension_event_type="workflow.step.waiting",
            wake_at=NOW,
            retry_attempt=None,
            definition_fingerprint=None,
            wait_event_type=None,
            match_expr=None,
            suspension_version=2,
            lookback_from=NOW,
            match_key=None,
        )
        plain.pending.upsert_many([row])
        [stored] = plain.pending.for_tenant(TENANT)
    assert (stored.run_id, stored.wake_at) == (row.run_id, NOW)


def test_a_match_the_wakeup_already_marked_is_not_written_again(db_url: str, store: Store) -> None:
    """The wakeup marks a row in the transaction that appends its match; projecting that
    match then changes nothing, and writes nothing (no new row version: same xmin). A
    row the mark would change (its look-back cursor still set) is written."""
    registry = bench_registry()
    starts = [
        DomainEvent(id=f"x{i}", type="bench.await-start", payload={"id": f"k{i}"}, tenant_id=TENANT)
        for i in range(2)
    ]
    runs = [r.started[0].run_id for r in ingest_domain_events(store, starts, NOW, registry)]
    project_pending(store, NOW)
    woke = NOW + timedelta(seconds=5)
    for i in range(2):
        go = DomainEvent(id=f"gx{i}", type="bench.go", payload={"id": f"k{i}"}, tenant_id=TENANT)
        assert [w.run_id for w in wake_on_event(store, go, woke)] == [runs[i]]
    store.conn.execute(
        "UPDATE workflow_run_pending SET lookback_version = 1 WHERE run_id = %s::uuid",
        (runs[1],),
    )

    def versions() -> dict[str, str]:
        rows = store.conn.execute(
            "SELECT run_id::text AS run_id, xmin::text AS xmin FROM workflow_run_pending"
        ).fetchall()
        return {r["run_id"]: r["xmin"] for r in rows}

    before = versions()
    texts = _projected_texts(db_url, woke)
    after = versions()

    assert any("awaited_event_id = m.event_id" in t for t in texts)  # the mark was sent
    assert after[runs[0]] == before[runs[0]]
    assert after[runs[1]] != before[runs[1]]
    row = store.conn.execute(
        "SELECT lookback_version FROM workflow_run_pending WHERE run_id = %s::uuid", (runs[1],)
    ).fetchone()
    assert row is not None and row["lookback_version"] is None


def test_a_batchs_new_waits_take_their_types_lock_once_with_their_reads(
    db_url: str, store: Store
) -> None:
    """The (tenant, type) lock a look-back reads under is held until the batch commits:
    a batch of new waits of one type takes it once, and sends it with the first
    look-back's read, never in a round trip of its own."""
    registry = bench_registry()
    starts = [
        DomainEvent(id=f"l{i}", type="bench.await-start", payload={"id": f"l{i}"}, tenant_id=TENANT)
        for i in range(5)
    ]
    ingest_domain_events(store, starts, NOW, registry)
    logged = connect(db_url, sql_type=_RoundTripSql)
    try:
        project_pending(logged, NOW)
        trips = logged._sql.trips  # type: ignore[attr-defined]
    finally:
        logged.close()

    locks = [i for i, trip in enumerate(trips) for t in trip if "pg_advisory_xact_lock" in t]
    assert len(locks) == 1
    (trip,) = [trips[i] for i in locks]
    assert len(trip) > 1 and "pg_advisory_xact_lock" in trip[0]  # the read rides with it
    assert len(store.pending.for_tenant(TENANT)) == 5


class _RoundTripSql(Sql):
    """Sql that records the statements of each round trip it sends."""

    def __init__(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        super().__init__(conn)
        self.trips: list[list[str]] = []

    def _send(self, statements: Sequence[_Queued]) -> None:
        self.trips.append([s.sql for s in statements])
        super()._send(statements)
