"""Numbered, idempotent schema migrations recorded in schema_migrations."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import tuple_row

from ..errors import StoreError

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# Serialises concurrent migrators (two deploys, or Lambda retries of the custom resource).
_MIGRATION_LOCK = 0x77667200


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def all_migrations() -> list[Migration]:
    """Every migration shipped with the engine, in version order."""
    folder = resources.files(__package__).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        m = _FILE.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), entry.read_text()))
    found.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations must be numbered 0001.. without gaps, found {versions}")
    return found


def schema_sql() -> str:
    """The fresh-install schema (what all migrations together must produce)."""
    return resources.files(__package__).joinpath("schema.sql").read_text()


def _ensure_version_table(conn: psycopg.Connection[object]) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version integer PRIMARY KEY, name text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT clock_timestamp())"
    )


def pending_migrations(conn: psycopg.Connection[object]) -> list[Migration]:
    """Migrations not yet recorded in the database."""
    cur = conn.cursor(row_factory=tuple_row)
    exists = cur.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
    applied: set[int] = set()
    if exists and exists[0]:
        applied = {int(r[0]) for r in cur.execute("SELECT version FROM schema_migrations")}
    return [mig for mig in all_migrations() if mig.version not in applied]


class MigrationTimeout(StoreError):
    """The migrations could not take their locks or finish within the time allowed.

    Nothing was applied by the attempt that timed out (its transaction rolled back)."""


def _milliseconds(seconds: float) -> str:
    return f"{max(1, int(seconds * 1000))}ms"


def apply_migrations(
    conn: psycopg.Connection[object],
    *,
    lock_timeout_s: float | None = None,
    statement_timeout_s: float | None = None,
) -> list[Migration]:
    """Apply pending migrations, each in its own transaction; return those applied.

    Safe to run concurrently and repeatedly: an advisory lock serialises migrators and
    each version is recorded in the same transaction as its DDL.

    Args:
        conn: a connection outside any transaction.
        lock_timeout_s: give up waiting for any lock (the migrators' advisory lock, a
            table lock held by a running function) after this long. A DDL statement that
            waits for its lock queues every later query on that table behind it, so in a
            live system the wait must be short; the caller retries.
        statement_timeout_s: give up on any single statement after this long.

    Raises:
        psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled: a timeout hit;
            the transaction rolled back and nothing of it is applied.
    """
    applied: list[Migration] = []
    with conn.transaction():
        # SET LOCAL: the limits end with this transaction, never leak into the session.
        if lock_timeout_s is not None:
            conn.execute(f"SET LOCAL lock_timeout = '{_milliseconds(lock_timeout_s)}'")
        if statement_timeout_s is not None:
            conn.execute(f"SET LOCAL statement_timeout = '{_milliseconds(statement_timeout_s)}'")
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        _ensure_version_table(conn)
        for mig in pending_migrations(conn):
            with conn.transaction():
                conn.execute(mig.sql.encode())
                conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (mig.version, mig.name),
                )
            applied.append(mig)
    return applied


def apply_migrations_within(
    conn: psycopg.Connection[object],
    budget_s: float,
    *,
    lock_timeout_s: float = 5.0,
    retry_pause_s: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Migration]:
    """Apply pending migrations within a time budget, retrying lock timeouts.

    Each attempt waits at most `lock_timeout_s` for a lock and runs no statement longer
    than the budget left, so a deploy never hangs on a busy table: it retries while
    running functions release their locks, and gives up in time to report the failure.

    Raises:
        MigrationTimeout: the budget ran out; nothing of the last attempt is applied.
    """
    deadline = clock() + budget_s
    attempts = 0
    while True:
        left = deadline - clock()
        if left <= 0:
            raise MigrationTimeout(
                f"migrations not applied within {budget_s:.0f} s ({attempts} attempt(s))"
            )
        attempts += 1
        try:
            return apply_migrations(
                conn, lock_timeout_s=min(lock_timeout_s, left), statement_timeout_s=left
            )
        except pg_errors.LockNotAvailable:
            if deadline - clock() <= retry_pause_s:
                raise MigrationTimeout(
                    f"migrations could not take their locks within {budget_s:.0f} s "
                    f"({attempts} attempt(s) of {lock_timeout_s:.0f} s)"
                ) from None
            sleep(retry_pause_s)
        except pg_errors.QueryCanceled as error:
            raise MigrationTimeout(
                f"a migration statement ran past the {budget_s:.0f} s budget"
            ) from error
