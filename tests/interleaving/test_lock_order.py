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
from workflow_runner.engine import joins, operator_actions, resume
from workflow_runner.engine.children import start_children
from workflow_runner.engine.joins import count_settled_children
from workflow_runner.engine.operator_actions import Operator
from workflow_runner.engine.passes import load_run
from workflow_runner.engine.resume import resume_run
from workflow_runner.errors import StreamConflict
from workflow_runner.store import PassWrite, RunEnd, Store, connect
from workflow_runner.store.streams import NewEvent
from workflow_runner.stream import RUN_STREAM, RunCancelled
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


def _waits_or_ends(admin: Any, before: set[int], thread: threading.Thread) -> None:
    """Until `thread` waits for a lock or has ended (2 s at most)."""
    deadline = time.monotonic() + 2
    while thread.is_alive() and time.monotonic() < deadline:
        now = {r["pid"] for r in admin.execute("SELECT pid FROM pg_stat_activity")}
        if _waiting_for_locks(admin, now - before):
            return
        time.sleep(0.01)


def _paused_in(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, thread: str
) -> tuple[threading.Event, threading.Event]:
    """`module.name`, called in the thread named `thread`, waits there until the second
    event is set; the first is set when it is called there. Other threads pass through."""
    real, reached, go = getattr(module, name), threading.Event(), threading.Event()

    def paused(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == thread:
            reached.set()
            assert go.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, paused)
    return reached, go


def _race(
    db_url: str,
    actors: dict[str, Any],
    first: str,
    reached: threading.Event,
    go: threading.Event,
    second_waits: bool = False,
) -> list[BaseException]:
    """Run the actor `first` (a thread of that name) to its pause (`reached`), then the
    other one until it waits for a lock or ends (`second_waits`: it must be waiting),
    then let the first go (`go`); the errors either raised."""
    errors: list[BaseException] = []
    second = next(name for name in actors if name != first)
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as admin:
        before = {r["pid"] for r in admin.execute("SELECT pid FROM pg_stat_activity").fetchall()}
        one = _in_own_session(db_url, errors, actors[first])
        one.name = first
        one.start()
        assert reached.wait(10)
        two = _in_own_session(db_url, errors, actors[second])
        two.name = second
        two.start()
        _waits_or_ends(admin, before, two)
        waited = two.is_alive()
        go.set()
        for thread in (one, two):
            thread.join(timeout=30)
    assert waited or not second_waits
    return errors


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
    if first == "cancel":  # paused once its first lock is held, before it cancels
        reached, go = _paused_in(monkeypatch, operator_actions, "cancel_run", "cancel")
    else:  # paused once it holds the join, before it tells the parent
        reached, go = _paused_in(monkeypatch, joins, "_append_to_waiting_parent", "count")
    actors = {
        "count": lambda s: count_settled_children(s, DUE),
        "cancel": lambda s: operator_actions.cancel_as_operator(
            s, TENANT_A, parent, DUE, Operator("ops")
        ),
    }
    errors = _race(db_url, actors, first, reached, go)
    assert errors == []
    assert load_run(store, TENANT_A, parent).status == "cancelled"
    actions = [e for e in store.streams.load(TENANT_A, parent) if e.type == OPERATOR_ACTION]
    assert len(actions) == 1


# --- a pass ending a run against a cancel of it ------------------------------------------


def _settled_in_join(store: Store, child: str) -> list[str]:
    rows = store.conn.execute(
        "SELECT status FROM run_children WHERE child_run_id = %s", (child,)
    ).fetchall()
    return [r["status"] for r in rows]


@pytest.mark.parametrize("first", ["cancel", "pass"])
def test_a_pass_ending_a_child_and_a_cancel_of_it_do_not_deadlock(
    db_url: str, store: Store, first: str
) -> None:
    """The two statements of the deadlock the composition load met about four times a
    run. A pass that ends a child writes its events and settles the child's rows in its
    parents' joins in one statement (record_pass); a cancel appends to the child's stream
    and then settles the same rows. The statement locked the rows before its insert
    (PostgreSQL runs the unreferenced insert last): after the cancel's append it held the
    rows while it waited for the cancel's version, and the cancel then waited for the
    rows. Now it inserts first and waits holding nothing: the cancel goes through and
    the pass meets the cancel's event (StreamConflict: its batch runs again, claiming
    first, and finds the child cancelled). The pass first: the cancel's append waits for
    it and then finds its version taken."""
    put(store, "call-kid", id="p1", key="k1")
    start_children(store, REGISTRY, T0)
    kid = run_of("kid", "k1")
    version = load_run(store, TENANT_A, kid).version
    cancelled = RunCancelled(workflow_name="kid", step_index=0, reason="ops")
    ended = PassWrite(
        TENANT_A,
        kid,
        version,
        events=[NewEvent("workflow.run-completed", {"result": 1})],
        ended=RunEnd("completed", 1, None),
    )
    settle = PassWrite(TENANT_A, kid, 0, ended=RunEnd("cancelled", None, "ops"))
    appended: list[bool] = []
    reached, go = threading.Event(), threading.Event()

    def pause_if(name: str) -> None:
        """The first of the two holds what its statement took until let go."""
        if name == first:
            reached.set()
            assert go.wait(30)

    def cancel(s: Store) -> None:
        """As cancel_in_transaction: append, then settle the child's rows."""
        with s.transaction():
            appended.append(s.streams.append(TENANT_A, kid, RUN_STREAM, version, [cancelled], DUE))
            pause_if("cancel")
            if appended[-1]:
                s.streams.record_passes([settle], DUE)()

    def pass_(s: Store) -> None:
        with s.transaction():
            s.streams.record_passes([ended], DUE)()
            pause_if("pass")

    # the second waits for the first one's version of the stream
    errors = _race(db_url, {"cancel": cancel, "pass": pass_}, first, reached, go, True)
    if first == "cancel":
        assert appended == [True]
        assert [type(e) for e in errors] == [StreamConflict]
        assert _settled_in_join(store, kid) == ["cancelled"]
    else:
        assert appended == [False] and errors == []
        assert _settled_in_join(store, kid) == ["completed"]


@pytest.mark.parametrize("first", ["cancel", "pass"])
def test_an_operators_cancel_that_loses_a_deadlock_to_the_parents_last_pass_runs_again(
    db_url: str, store: Store, monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    """The operator's cancel locks the parent's open joins and appends its audit fact;
    the parent's last pass claims the parent (an append) and, ending it, closes its joins.
    Claim first, then the cancel: each waits for the other, and PostgreSQL rolls the
    cancel back (it waited first, and its session notices sooner). The cancel runs again
    in a fresh transaction, finds the parent completed and records nothing; before, the
    operator got the deadlock as an error. The other order never deadlocked."""
    put(store, "call-kid", id="p1", key="k1")
    start_children(store, REGISTRY, T0)
    parent, kid = run_of("call-kid", "p1"), run_of("kid", "k1")
    assert resume_run(store, TENANT_A, kid, 0, DUE, registry=REGISTRY).outcome == "completed"
    count_settled_children(store, DUE)  # the parent is told: due at once
    waiting = load_run(store, TENANT_A, parent).suspension
    assert waiting is not None
    results: list[Any] = []

    def cancel(s: Store) -> None:
        s.conn.execute("SET deadlock_timeout = '100ms'")
        results.append(
            operator_actions.cancel_as_operator(s, TENANT_A, parent, DUE, Operator("ops"))
        )

    if first == "cancel":  # the joins locked and the audit fact appended, before it cancels
        reached, go = _paused_in(monkeypatch, operator_actions, "cancel_run", "cancel")
    else:  # its claim appended, before its pass runs
        reached, go = _paused_in(monkeypatch, resume, "_continue_claimed", "pass")
    actors = {
        "cancel": cancel,
        "pass": lambda s: results.append(
            resume_run(s, TENANT_A, parent, waiting.step_index, DUE, registry=REGISTRY)
        ),
    }
    errors = _race(db_url, actors, first, reached, go)
    assert errors == []
    [action] = [r for r in results if isinstance(r, operator_actions.ActionResult)]
    audit = [e for e in store.streams.load(TENANT_A, parent) if e.type == OPERATOR_ACTION]
    if first == "cancel":
        assert action.happened and load_run(store, TENANT_A, parent).status == "cancelled"
        assert len(audit) == 1
    else:
        assert not action.happened and load_run(store, TENANT_A, parent).status == "completed"
        assert audit == []
