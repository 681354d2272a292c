"""A transaction left open anywhere on the server no longer stops the pending
projection; only the engine's own transactions hold it back, and never for long
(issue 11, item 2). The projection still never skips or repeats an event of its own."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from workflow_runner import ManualClock, define_workflow, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.embedded import database_url
from workflow_runner.errors import TransientStoreError
from workflow_runner.store import Store, connect

from tests.support import TENANT_A, event, stream_types


@pytest.fixture
def foreign_transaction(pg_server_url: str) -> Iterator[psycopg.Connection[Any]]:
    """Another application's database on the same server, with a transaction that wrote
    (so it holds a transaction id) and then sits idle for the whole test."""
    name = f"foreign_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    conn = psycopg.connect(database_url(pg_server_url, name), application_name="billing")
    conn.execute("CREATE TABLE invoices (id int)")
    conn.execute("INSERT INTO invoices VALUES (1)")  # a write: the session holds an xid
    try:
        yield conn
    finally:
        conn.close()
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _register(registry: WorkflowRegistry) -> None:
    registry.register(
        define_workflow(
            name="flow",
            trigger=on_event("flow.started"),
            idempotency_key=lambda e: e.payload["k"],
            awaits={"go": "flow.go"},
            register=False,
            steps=lambda s: [
                s.wait(for_="PT1M"),
                s.wait_for_event(
                    "flow.go",
                    match=lambda ctx: {
                        "version": 1,
                        "expr": {
                            "kind": "atom",
                            "path": ["k"],
                            "op": {"kind": "eq", "value": ctx.event.payload["k"]},
                        },
                    },
                    timeout="P1D",
                ),
                s.return_({"isSuccess": True}),
            ],
        )
    )


def test_timers_and_wakeups_flow_while_another_database_keeps_a_transaction_open(
    store: Store,
    registry: WorkflowRegistry,
    clock: ManualClock,
    foreign_transaction: psycopg.Connection[Any],
) -> None:
    _register(registry)
    for k in ("a", "b"):
        ops.ingest_domain_event(store, event("flow.started", {"k": k}), clock.now(), registry)
    assert ops.project_pending(store, clock.now()).applied == 4  # started + waiting, twice

    clock.advance(timedelta(minutes=1))
    resumed = [
        ops.resume_run(store, TENANT_A, row.run_id, 0, clock.now(), registry=registry)
        for row in store.pending.due(TENANT_A, clock.now(), 10)
    ]
    assert [r.outcome for r in resumed] == ["suspended", "suspended"]
    assert ops.project_pending(store, clock.now()).applied == 4  # resumed + waiting, twice
    woken = ops.wake_on_event(store, event("flow.go", {"k": "a"}), clock.now())
    assert [w.run_id for w in woken] == [run_id_for("flow", "a")]
    ops.resume_run(store, TENANT_A, run_id_for("flow", "a"), 1, clock.now(), registry=registry)
    assert ops.project_pending(store, clock.now()).applied == 3
    assert stream_types(store, run_id_for("flow", "a"))[-1] == ev.RUN_COMPLETED
    assert [r.run_id for r in store.pending.for_tenant(TENANT_A)] == [run_id_for("flow", "b")]
    # The foreign transaction is still open, and untouched.
    assert foreign_transaction.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS


def test_an_own_open_transaction_holds_the_projection_until_its_idle_timeout(
    db_url: str, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    """An engine session stuck in a transaction (a Lambda frozen mid-pass) might still
    append: the projection waits for it, and its idle timeout ends the wait."""
    _register(registry)
    stuck = connect(db_url, idle_in_transaction_timeout_seconds=1)
    stuck_pid = stuck.conn.info.backend_pid
    stuck.conn.execute("BEGIN")
    stray = str(uuid.uuid4())
    stuck.inbox.register_tenant(stray, clock.now())  # a write: the session holds an xid
    ops.ingest_domain_event(store, event("flow.started", {"k": "late"}), clock.now(), registry)
    assert ops.project_pending(store, clock.now()).applied == 0  # held: it is ours
    deadline = time.monotonic() + 30
    applied = 0
    while applied == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
        applied = ops.project_pending(store, clock.now()).applied
    assert applied == 2  # run-started and step.waiting
    gone = store.conn.execute(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE pid = %s", (stuck_pid,)
    )
    assert gone.fetchone() == {"n": 0}  # the server ended the idle session
    assert stray not in store.inbox.tenants()  # its work was rolled back
    stuck.close()


def test_the_engines_connections_carry_its_name_and_bounded_timeouts(db_url: str) -> None:
    s = connect(db_url, statement_timeout_seconds=7, idle_in_transaction_timeout_seconds=9)
    try:
        row = s.conn.execute(
            "SELECT current_setting('application_name') AS app,"
            " current_setting('statement_timeout') AS st,"
            " current_setting('idle_in_transaction_session_timeout') AS it"
        ).fetchone()
        assert row == {"app": "workflow-runner", "st": "7s", "it": "9s"}
    finally:
        s.close()
    default = connect(db_url)
    try:
        row = default.conn.execute("SHOW statement_timeout").fetchone()
        assert row == {"statement_timeout": "1min"}
    finally:
        default.close()


def test_concurrent_writers_are_applied_exactly_once_in_spite_of_a_foreign_transaction(
    db_url: str, store: Store, clock: ManualClock, foreign_transaction: psycopg.Connection[Any]
) -> None:
    """Writers hold their transactions open for a while after appending, so later
    transactions commit first with higher ids; the projection runs meanwhile. Every
    event ends up read exactly once."""
    read: Counter[int] = Counter()
    streams = store.streams
    original = streams.read_after

    def recording(*args: Any, **kwargs: Any) -> Any:
        events = original(*args, **kwargs)
        read.update(e.position for e in events)
        return events

    streams.read_after = recording  # type: ignore[method-assign]
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        own = connect(db_url)
        try:
            for _ in range(40):
                run_id = str(uuid.uuid4())
                try:
                    with own.transaction():
                        waiting = ev.StepWaiting(
                            workflow_name="w",
                            trigger_event_type="t",
                            step_index=0,
                            path=[{"i": 0}],
                            definition_fingerprint="f",
                            wake_at=clock.now() + timedelta(days=1),
                        )
                        own.streams.append(
                            TENANT_A, run_id, ev.RUN_STREAM, 0, [waiting], clock.now()
                        )
                        time.sleep(rng.random() * 0.02)
                except TransientStoreError:
                    continue
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            own.close()

    def projector() -> None:
        while not stop.is_set():
            try:
                ops.project_pending(store, clock.now(), batch_size=7)
            except BaseException as error:  # pragma: no cover - reported below
                errors.append(error)
                return

    writers = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    reader = threading.Thread(target=projector)
    reader.start()
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    reader.join()
    ops.project_pending(store, clock.now())
    assert errors == []
    positions = [r["position"] for r in store.conn.execute("SELECT position FROM wf_events")]
    assert len(positions) == 160
    assert read == Counter(positions)  # every event once: none skipped, none repeated
    assert len(store.pending.for_tenant(TENANT_A, limit=1000)) == 160


def test_the_functions_take_their_timeouts_from_the_settings(db_url: str) -> None:
    from workflow_runner.aws.connection import ConnectionCache
    from workflow_runner.settings import Settings

    settings = Settings.from_env(
        {
            "DATABASE_URL": db_url,
            "DB_STATEMENT_TIMEOUT_SECONDS": "5",
            "DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": "0",
        }
    )
    cache = ConnectionCache(settings)
    try:
        row = (
            cache.store()
            .conn.execute(
                "SELECT current_setting('statement_timeout') AS st,"
                " current_setting('idle_in_transaction_session_timeout') AS it"
            )
            .fetchone()
        )
        assert row == {"st": "5s", "it": "0"}  # 0: left to the server
    finally:
        cache.invalidate()


@pytest.mark.parametrize(("setting", "prepared"), [(None, True), ("false", False)])
def test_the_functions_prepare_statements_unless_the_settings_say_not_to(
    db_url: str, setting: str | None, prepared: bool
) -> None:
    """Prepared statements (psycopg's, from a statement's fifth run) pin or break the
    sessions of some proxies: DB_PREPARED_STATEMENTS=false opens connections without."""
    from workflow_runner.aws.connection import ConnectionCache
    from workflow_runner.settings import Settings

    env = {"DATABASE_URL": db_url}
    if setting is not None:
        env["DB_PREPARED_STATEMENTS"] = setting
    cache = ConnectionCache(Settings.from_env(env))
    try:
        store = cache.store()
        for _ in range(8):
            store.runs.for_tenant(TENANT_A)
        count = store.conn.execute("SELECT count(*) AS n FROM pg_prepared_statements").fetchone()
        assert count is not None and (count["n"] > 0) is prepared
    finally:
        cache.invalidate()
