"""Migrations on a live database: bounded lock waits (retried within the budget) and
bounded statements, so a deploy cannot stall the running functions or itself."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from workflow_runner.embedded import database_url
from workflow_runner.store import migrate
from workflow_runner.store.migrate import (
    Migration,
    MigrationTimeout,
    apply_migrations,
    apply_migrations_within,
)

MIGRATION_LOCK = 0x77667200


@pytest.fixture
def empty_db(pg_server_url: str) -> Iterator[str]:
    name = f"wfr_mig_{int(time.time() * 1000) % 10**9}"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(pg_server_url, name)
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def applied_versions(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return []
        return [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]


def test_a_held_lock_times_out_within_the_budget_and_applies_nothing(empty_db: str) -> None:
    with psycopg.connect(empty_db) as holder, psycopg.connect(empty_db, autocommit=True) as conn:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        started = time.monotonic()
        with pytest.raises(MigrationTimeout, match="could not take their locks"):
            apply_migrations_within(conn, 1.5, lock_timeout_s=0.3, retry_pause_s=0.2)
        assert time.monotonic() - started < 2.5
        holder.rollback()
    assert applied_versions(empty_db) == []


def test_a_lock_released_while_retrying_lets_the_migrations_through(empty_db: str) -> None:
    holder = psycopg.connect(empty_db)
    holder.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
    release = threading.Timer(0.8, holder.rollback)
    release.start()
    try:
        with psycopg.connect(empty_db, autocommit=True) as conn:
            applied = apply_migrations_within(conn, 10, lock_timeout_s=0.3, retry_pause_s=0.2)
    finally:
        release.join()
        holder.close()
    assert [m.version for m in applied] == [m.version for m in migrate.all_migrations()]
    assert applied_versions(empty_db) == [m.version for m in applied]


def test_a_table_lock_held_by_a_running_function_bounds_the_ddl_wait(
    empty_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A migration's DDL waits for its table lock at most lock_timeout (a waiting ALTER
    would queue every later query on that table behind it), and goes through once the
    function's transaction ends."""
    with psycopg.connect(empty_db, autocommit=True) as conn:
        apply_migrations(conn)
    shipped = migrate.all_migrations()
    probe = Migration(len(shipped) + 1, "probe", "ALTER TABLE wf_events ADD COLUMN probe integer")
    monkeypatch.setattr(migrate, "all_migrations", lambda: [*shipped, probe])
    with psycopg.connect(empty_db) as function, psycopg.connect(empty_db, autocommit=True) as conn:
        function.execute("SELECT count(*) FROM wf_events")  # ACCESS SHARE until it commits
        started = time.monotonic()
        with pytest.raises(MigrationTimeout):
            apply_migrations_within(conn, 1.0, lock_timeout_s=0.3, retry_pause_s=0.2)
        assert time.monotonic() - started < 2.0
        assert applied_versions(empty_db)[-1] == len(shipped)
        function.rollback()
        assert [m.name for m in apply_migrations_within(conn, 5, lock_timeout_s=0.3)] == ["probe"]


def test_a_statement_past_the_budget_is_cancelled(
    empty_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = Migration(1, "slow", "SELECT pg_sleep(3)")
    monkeypatch.setattr(migrate, "all_migrations", lambda: [slow])
    with psycopg.connect(empty_db, autocommit=True) as conn:
        started = time.monotonic()
        with pytest.raises(MigrationTimeout, match="ran past"):
            apply_migrations_within(conn, 0.5)
        assert time.monotonic() - started < 2.0
    assert applied_versions(empty_db) == []


def test_the_limits_do_not_outlive_the_migration_transaction(empty_db: str) -> None:
    with psycopg.connect(empty_db, autocommit=True) as conn:
        apply_migrations(conn, lock_timeout_s=0.25, statement_timeout_s=7)
        row = conn.execute(
            "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')"
        ).fetchone()
    assert row == ("0", "0")


# --- no-transaction migrations (CREATE INDEX CONCURRENTLY) under the same limits -----------


def index_state(url: str, name: str) -> bool | None:
    """True: valid, False: INVALID (a build that died), None: absent."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE c.relname = %s",
            (name,),
        ).fetchone()
    return None if row is None else bool(row[0])


def test_a_concurrent_index_build_that_timed_out_is_rebuilt_by_the_retry(empty_db: str) -> None:
    """A CREATE INDEX CONCURRENTLY waits for every transaction older than its snapshot; the
    lock timeout bounds that wait too, and the build it cancels leaves an INVALID index.
    The retry (same budget) drops it and builds it again once the transaction ended."""
    with psycopg.connect(empty_db, autocommit=True) as conn:
        apply_migrations(conn)
        (lookups,) = [m for m in migrate.all_migrations() if m.name == "console_run_lookups"]
        assert not lookups.transactional
        conn.execute("DROP INDEX workflow_runs_run_id_idx")
        conn.execute("DELETE FROM schema_migrations WHERE version = %s", (lookups.version,))
    # A running function's transaction, on another table: it only holds a snapshot.
    function = psycopg.connect(empty_db)
    function.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    function.execute("SELECT count(*) FROM inbox")
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 1:
            assert index_state(empty_db, "workflow_runs_run_id_idx") is False
            function.rollback()
        time.sleep(seconds)

    try:
        with psycopg.connect(empty_db, autocommit=True) as conn:
            applied = apply_migrations_within(
                conn, 10, lock_timeout_s=0.3, retry_pause_s=0.1, sleep=pause
            )
    finally:
        function.close()
    assert [m.name for m in applied] == [lookups.name] and len(pauses) == 1
    assert index_state(empty_db, "workflow_runs_run_id_idx") is True
    assert applied_versions(empty_db) == sorted(m.version for m in migrate.all_migrations())


def test_the_session_keeps_its_own_limits_when_a_migration_times_out(empty_db: str) -> None:
    """No-transaction migrations need session-level limits; they are put back to what the
    session had, also when the attempt fails."""
    with psycopg.connect(empty_db) as holder, psycopg.connect(empty_db, autocommit=True) as conn:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute("SET lock_timeout = '7s'")
        conn.execute("SET statement_timeout = '9s'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            apply_migrations(conn, lock_timeout_s=0.2, statement_timeout_s=3)
        row = conn.execute(
            "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')"
        ).fetchone()
        assert row == ("7s", "9s")
        assert conn.autocommit
        holder.rollback()
    assert applied_versions(empty_db) == []
