"""The pending table indexes event waits only (migration 0010): a timer wait has no
wait_event_type and leaves no entry in the event-wait index, while the wakeup's lookup
and the purge's check still find event waits through it in the plans prepared
statements get."""

from __future__ import annotations

from datetime import UTC, datetime

from workflow_runner.store import Store

from tests.support import TENANT_A, TENANT_B, positional_query

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
INDEX = "workflow_run_pending_event_waits_idx"


def _add_waits(store: Store, tenant: str, n: int, event_type: str | None) -> None:
    store.conn.execute(
        "INSERT INTO workflow_run_pending (tenant_id, run_id, step_index, workflow_name,"
        " suspension_event_type, wake_at, suspension_version, wait_event_type, match_key)"
        " SELECT %(tenant)s, gen_random_uuid(), 1, 'w', 'workflow.step.waiting', %(at)s, 2,"
        " %(type)s, CASE WHEN %(type)s::text IS NOT NULL THEN 'k' || g END"
        " FROM generate_series(1, %(n)s) g",
        {"tenant": tenant, "at": T0, "type": event_type, "n": n},
    )


def _index_pages(store: Store) -> int:
    row = store.conn.execute(
        "SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::int AS pages",
        [INDEX],
    ).fetchone()
    assert row is not None
    return int(row["pages"])


def _generic_plan(store: Store, name: str) -> str:
    """The plan a prepared statement of the named query gets once it goes generic: the
    one a warm function runs on, whatever the values (none are given)."""
    text, names = positional_query(name)
    store.conn.execute("SET plan_cache_mode = force_generic_plan")
    store.conn.execute(f"PREPARE generic_plan AS {text}".encode())
    try:
        nulls = ", ".join(["NULL"] * len(names))
        rows = store.conn.execute(f"EXPLAIN EXECUTE generic_plan({nulls})".encode()).fetchall()
    finally:
        store.conn.execute("DEALLOCATE generic_plan")
        store.conn.execute("RESET plan_cache_mode")
    return "\n".join(r["QUERY PLAN"] for r in rows)


def _assert_never_analyzed(store: Store) -> None:
    """The pending table has no statistics yet (what a plan on it is chosen without)."""
    row = store.conn.execute(
        "SELECT reltuples FROM pg_class WHERE oid = 'workflow_run_pending'::regclass"
    ).fetchone()
    assert row is not None and row["reltuples"] < 0


def _index_conditions(plan: str) -> list[str]:
    """The plan's index conditions, a line each."""
    return [line for line in plan.splitlines() if "Index Cond" in line]


def test_timer_waits_leave_no_entry_in_the_event_wait_index(store: Store) -> None:
    _add_waits(store, TENANT_A, 1, "order.approved")
    one_event_wait = _index_pages(store)
    _add_waits(store, TENANT_A, 5_000, None)  # sleeps: no event type
    assert _index_pages(store) == one_event_wait
    _add_waits(store, TENANT_A, 5_000, "order.approved")
    assert _index_pages(store) > one_event_wait  # while event waits do go in


def test_the_wakeup_lookup_and_the_purge_check_read_event_waits_by_the_index(
    store: Store,
) -> None:
    _add_waits(store, TENANT_A, 20_000, None)
    _add_waits(store, TENANT_A, 500, "order.approved")
    _add_waits(store, TENANT_B, 500, "order.approved")
    store.conn.execute("ANALYZE workflow_run_pending")

    lookup = _generic_plan(store, "waiting_rows_for_events")
    assert INDEX in lookup and "Seq Scan on workflow_run_pending" not in lookup, lookup

    purge = _generic_plan(store, "purge_inbox_delete")
    assert INDEX in purge and "Seq Scan on workflow_run_pending" not in purge, purge

    # The lookup still finds exactly the tenant's unmatched waits of the type and key: a
    # matched wait stays in the index until its row goes, and is left out on the row.
    _add_waits(store, TENANT_A, 7, "order.approved")
    store.conn.execute(
        "UPDATE workflow_run_pending SET awaited_event_id = 'e0'"
        " WHERE tenant_id = %s AND match_key = 'k7' AND ctid = (SELECT min(ctid)"
        " FROM workflow_run_pending WHERE tenant_id = %s AND match_key = 'k7')",
        [TENANT_A, TENANT_A],
    )
    found = store.pending.waiting_for(TENANT_A, "order.approved", T0, keys=["k7"], event_id="e1")
    assert len(found) == 1


def test_the_wakeup_lookup_reads_the_events_keys_by_the_index_not_every_wait_of_its_type(
    store: Store,
) -> None:
    """An event offering keys reads the waits of those keys and the unkeyed ones: the key
    is an index condition in the prepared statement's plan (an OR over it made every
    event read every wait of its type, thousands of rows for one match)."""
    _add_waits(store, TENANT_A, 5_000, "order.approved")
    store.conn.execute("ANALYZE workflow_run_pending")

    lookup = _generic_plan(store, "waiting_rows_for_events")
    conditions = _index_conditions(lookup)
    assert any("match_key = key" in line for line in conditions), lookup  # each key
    assert any("match_key IS NULL" in line for line in conditions), lookup

    found = store.pending.waiting_for(TENANT_A, "order.approved", T0, keys=["k7"], event_id="e1")
    assert len(found) == 1  # and every wait when the event offers no keys:
    assert len(store.pending.waiting_for(TENANT_A, "order.approved", T0, None, "e1")) == 5_000
    # The wakeup's batch: each event gets what its own lookup would.
    with store.transaction():
        batch = store.pending.locked_waiting_for(
            TENANT_A,
            "order.approved",
            [(T0, ["k7"], "e1"), (T0, None, "e2"), (T0, ["none"], "e3"), (T0, ["k9"], "e4")],
        )
    assert [len(rows) for rows in batch] == [1, 5_000, 0, 1]
    assert batch[0] == found and batch[1] == sorted(batch[1], key=lambda w: w.run_id)


def test_the_wakeup_lookup_probes_the_index_by_key_before_the_table_is_analyzed(
    store: Store,
) -> None:
    """A deployment's first minutes, or a burst of new waits before autovacuum's analyze:
    with no statistics, the generic plan still reads the offered keys' waits through the
    event-wait index, not every wait of the tenant through the tenant-only index (which
    `match_key = ANY(keys)` got there: 185 us instead of 46 us of server time per
    event in a 1,000-run burst, bench.statements)."""
    _add_waits(store, TENANT_A, 1_000, "order.approved")
    _assert_never_analyzed(store)

    lookup = _generic_plan(store, "waiting_rows_for_events")
    assert "workflow_run_pending_tenant_wake_at_idx" not in lookup, lookup
    conditions = _index_conditions(lookup)
    assert any("match_key = key" in line for line in conditions), lookup

    found = store.pending.waiting_for(TENANT_A, "order.approved", T0, keys=["k7"], event_id="e1")
    assert len(found) == 1


def test_marking_matches_reads_only_the_named_runs_before_the_table_is_analyzed(
    store: Store,
) -> None:
    """The wakeup records its matches (mark_pending_matched_many) through the primary
    key, run by run: joined on the runs alone, a table never analyzed got a hash join
    over every waiting row of the tenant, read once per call (1.0 ms for 10 marks among
    5,000 waits, and growing with the tenant's waits)."""
    _add_waits(store, TENANT_A, 5_000, "order.approved")
    _add_waits(store, TENANT_B, 3, "order.approved")
    _assert_never_analyzed(store)

    plan = _generic_plan(store, "mark_pending_matched_many")
    conditions = _index_conditions(plan)
    assert len(conditions) == 2, plan  # the probe by run, then the update by key
    assert all("tenant_id = $" in line and "run_id = " in line for line in conditions), plan
    assert "workflow_run_pending_tenant_wake_at_idx" not in plan, plan
    assert "Seq Scan on workflow_run_pending" not in plan, plan

    # It marks exactly the rows named, each at the suspension version given.
    waits = store.conn.execute(
        "SELECT tenant_id::text AS tenant, run_id::text AS run, suspension_version AS v"
        " FROM workflow_run_pending WHERE match_key IN ('k1', 'k2', 'k3') ORDER BY tenant, run"
    ).fetchall()
    a = [w for w in waits if w["tenant"] == TENANT_A]
    b = [w for w in waits if w["tenant"] == TENANT_B]
    marks = [(a[0]["run"], a[0]["v"], "order.approved", "e1")]
    marks.append((a[1]["run"], a[1]["v"] + 1, "order.approved", "e2"))  # a later suspension
    marks.append((b[0]["run"], b[0]["v"], "order.approved", "e3"))  # another tenant's run
    with store.transaction():
        store.pending.mark_matched_many(TENANT_A, marks, T0)
    matched = store.conn.execute(
        "SELECT tenant_id::text AS tenant, run_id::text AS run, awaited_event_id AS event"
        " FROM workflow_run_pending WHERE awaited_event_id IS NOT NULL"
    ).fetchall()
    assert matched == [{"tenant": TENANT_A, "run": a[0]["run"], "event": "e1"}]
