"""A single run's tail read (a task attempt's outcome, a lone resume) runs on its
generic plan: left to the server, its custom plan (costed for one run) always won and
the read was planned anew on every call, which cost more than the read. The plan choice
in force before the read is back for the rest of the transaction."""

from __future__ import annotations

import uuid

from workflow_runner.store import Store

from tests.support import TENANT_A


def test_a_single_runs_tail_read_is_planned_once_and_the_servers_choice_comes_back(
    store: Store,
) -> None:
    for _ in range(12):  # psycopg prepares a statement from its fifth run on
        with store.transaction():
            events, trigger = store.streams.load_run(TENANT_A, str(uuid.uuid4()), tail=True)
            assert (events, trigger) == ([], None)
            mode = store.conn.execute("SELECT current_setting('plan_cache_mode') AS m").fetchone()
            assert mode is not None and mode["m"] == "auto"

    rows = store.conn.execute(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
        " WHERE statement LIKE '%%AS tail_from%%'"
    ).fetchall()
    assert len(rows) == 1, rows
    assert rows[0]["custom_plans"] == 0 and rows[0]["generic_plans"] >= 5, rows


def test_a_plan_choice_set_before_the_read_is_the_one_restored(store: Store) -> None:
    # A role, session or transaction may have chosen plans for itself; the read's
    # generic plans must not leave the rest of the transaction on the server's default.
    with store.transaction():
        store.conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        store.streams.load_run(TENANT_A, str(uuid.uuid4()), tail=True)
        mode = store.conn.execute("SELECT current_setting('plan_cache_mode') AS m").fetchone()
        assert mode is not None and mode["m"] == "force_custom_plan"
    store.conn.execute("SET plan_cache_mode = force_custom_plan")
    try:
        with store.transaction():
            store.streams.load_run(TENANT_A, str(uuid.uuid4()), tail=True)
            mode = store.conn.execute("SELECT current_setting('plan_cache_mode') AS m").fetchone()
            assert mode is not None and mode["m"] == "force_custom_plan"
    finally:
        store.conn.execute("RESET plan_cache_mode")


def test_the_read_outside_a_transaction_has_nothing_to_restore_and_still_reads(
    store: Store,
) -> None:
    assert not store.in_transaction
    for _ in range(3):
        assert store.streams.load_run(TENANT_A, str(uuid.uuid4()), tail=True) == ([], None)
    mode = store.conn.execute("SELECT current_setting('plan_cache_mode') AS m").fetchone()
    assert mode is not None and mode["m"] == "auto"
