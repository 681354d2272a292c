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
import pytest
from psycopg.rows import dict_row
from workflow_runner.engine import joins, operator_actions
from workflow_runner.engine.children import start_children
from workflow_runner.engine.joins import count_settled_children
from workflow_runner.engine.operator_actions import Operator
from workflow_runner.engine.passes import load_run
from workflow_runner.engine.resume import resume_run
from workflow_runner.store import PassWrite, RunEnd, Store, connect
from workflow_runner.stream.names import OPERATOR_ACTION

from tests.interleaving.test_join_protocol import DUE, REGISTRY, T0, put, run_of
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


# --- an operator's cancel against the worker telling the same parent ----------------------


def _in_own_session(url: str, errors: list[BaseException], work: Any) -> threading.Thread:
    def run() -> None:
        store = connect(url)
        try:
            work(store)
        except BaseException as error:
            errors.append(error)
        finally:
            store.close()

    return threading.Thread(target=run)


def _paused(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, reached: threading.Event
) -> threading.Event:
    """`module.name` waits, when called, until the returned event is set; `reached` is
    set when it is called (inside its caller's transaction)."""
    real, go = getattr(module, name), threading.Event()

    def paused(*args: Any, **kwargs: Any) -> Any:
        reached.set()
        assert go.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, paused)
    return go


def _waits_or_ends(admin: Any, before: set[int], thread: threading.Thread) -> None:
    """Until `thread` waits for a lock or has ended (2 s at most)."""
    deadline = time.monotonic() + 2
    while thread.is_alive() and time.monotonic() < deadline:
        now = {r["pid"] for r in admin.execute("SELECT pid FROM pg_stat_activity")}
        if _waiting_for_locks(admin, now - before):
            return
        time.sleep(0.01)


@pytest.mark.parametrize("first", ["cancel", "count"])
def test_an_operators_cancel_and_the_count_telling_its_parent_do_not_deadlock(
    db_url: str, store: Store, monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    """The worker locks a parent's join, then appends to the parent's stream (its child
    settled: the parent is told); an operator's cancel records who asked on that stream
    and then cancels, which locks the parent's open joins. Appending first, the cancel
    held the stream's next version while it waited for the join the worker held, whose
    append waited for that version: a deadlock, one of the two failed (the composition
    load in tests/reliability saw it in about one run of three). Each goes first to the
    point where it holds what it takes first, and waits there while the other runs."""
    put(store, "call-kid", id="p1", key="k1")
    start_children(store, REGISTRY, T0)
    parent, kid = run_of("call-kid", "p1"), run_of("kid", "k1")
    assert resume_run(store, TENANT_A, kid, 0, DUE, registry=REGISTRY).outcome == "completed"
    reached = threading.Event()
    if first == "cancel":  # paused once its first lock is held, before it cancels
        go = _paused(monkeypatch, operator_actions, "cancel_run", reached)
    else:  # paused once it holds the join, before it tells the parent
        go = _paused(monkeypatch, joins, "_append_to_waiting_parent", reached)
    actors = {
        "count": lambda s: count_settled_children(s, DUE),
        "cancel": lambda s: operator_actions.cancel_as_operator(
            s, TENANT_A, parent, DUE, Operator("ops")
        ),
    }
    second = next(name for name in actors if name != first)
    errors: list[BaseException] = []
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as admin:
        before = {r["pid"] for r in admin.execute("SELECT pid FROM pg_stat_activity").fetchall()}
        one = _in_own_session(db_url, errors, actors[first])
        one.start()
        assert reached.wait(10)
        two = _in_own_session(db_url, errors, actors[second])
        two.start()
        _waits_or_ends(admin, before, two)
        go.set()
        for thread in (one, two):
            thread.join(timeout=30)
    assert errors == []
    assert load_run(store, TENANT_A, parent).status == "cancelled"
    actions = [e for e in store.streams.load(TENANT_A, parent) if e.type == OPERATOR_ACTION]
    assert len(actions) == 1
