"""Two statements that end the same two parents in opposite orders wait for each other
instead of deadlocking (issue 30, defect 6): each locks the parents' joins in one order.

The race needs both statements inside their lock waits at once, which stepping whole
statements cannot arrange; a third session holding one join's lock can: it holds the
join the first statement would lock first, both statements start and wait, and then it
lets go.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row
from workflow_runner.engine.children import start_children
from workflow_runner.store import PassWrite, RunEnd, Store, connect

from tests.interleaving.test_join_protocol import REGISTRY, T0, put, run_of
from tests.support import TENANT_A, TENANT_B


def _end_in_one_statement(url: str, parents: list[str], errors: list[BaseException]) -> None:
    store = connect(url)
    try:
        with store.transaction():
            ended = [
                PassWrite(TENANT_A, p, 0, ended=RunEnd("cancelled", None, "x")) for p in parents
            ]
            store.streams.record_passes(ended, T0)()
    except BaseException as error:
        errors.append(error)
    finally:
        store.close()


def _waiting_for_locks(admin: psycopg.Connection[dict[str, Any]], pids: set[int]) -> int:
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
    ).fetchall()
    return len({r["pid"] for r in rows} & pids)


def test_two_statements_ending_two_parents_in_opposite_orders_do_not_deadlock(
    db_url: str, store: Store
) -> None:
    put(store, "call-kid", id="p1", key="k1")
    put(store, "call-kid", id="p2", key="k2")
    start_children(store, REGISTRY, T0)
    # A production-sized table of joins (another tenant's, closed), so that the planner
    # finds each ended run's joins by index, in the order the runs are given, as it would
    # deployed (a table of a few rows is read whole, in one order for every statement).
    store.conn.execute(
        "INSERT INTO run_joins (tenant_id, join_id, parent_run_id, kind, child_workflow, "
        "total, concurrency, created_at, closed_at) "
        "SELECT %s, gen_random_uuid(), gen_random_uuid(), 'call', 'kid', 1, 1, now(), now() "
        "FROM generate_series(1, 50000)",
        (TENANT_B,),
    )
    store.conn.execute("ANALYZE run_joins")
    first, second = run_of("call-kid", "p1"), run_of("call-kid", "p2")
    [held] = store.conn.execute(
        "SELECT join_id FROM run_joins WHERE parent_run_id = %s", (first,)
    ).fetchall()
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as admin:
        before = {r["pid"] for r in admin.execute("SELECT pid FROM pg_stat_activity").fetchall()}
        blocker = psycopg.connect(db_url, autocommit=False)
        blocker.execute("SET deadlock_timeout = '100ms'")
        blocker.execute("SELECT 1 FROM run_joins WHERE join_id = %s FOR UPDATE", (held["join_id"],))
        errors: list[BaseException] = []
        threads = [
            threading.Thread(target=_end_in_one_statement, args=(db_url, order, errors))
            for order in ([first, second], [second, first])
        ]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 10
        while True:
            now = {r["pid"] for r in admin.execute("SELECT pid FROM pg_stat_activity").fetchall()}
            if _waiting_for_locks(admin, now - before) == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert _waiting_for_locks(admin, now - before) == 2  # both statements inside their waits
        blocker.commit()  # let go: the two now meet each other
        blocker.close()
        for thread in threads:
            thread.join(timeout=30)
    assert errors == []
    closed = store.conn.execute(
        "SELECT count(*) AS n FROM run_joins WHERE tenant_id = %s AND closed_at IS NOT NULL",
        (TENANT_A,),
    ).fetchone()
    assert closed is not None and closed["n"] == 2
