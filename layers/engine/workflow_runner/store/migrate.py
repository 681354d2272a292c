"""Numbered, idempotent schema migrations recorded in schema_migrations.

A migration runs in one transaction with its version record, unless its first line is
`-- migration: no-transaction`: then its statements run one by one outside any
transaction (what CREATE INDEX CONCURRENTLY needs, so an index can be built on a big
table without blocking its writers), and its version is recorded after the last one.
Such a migration must be safe to run again from the start (IF NOT EXISTS, a DROP INDEX
CONCURRENTLY IF EXISTS before each CREATE INDEX CONCURRENTLY), and each of its
statements ends with `;` at the end of a line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg.rows import tuple_row

from ..errors import StoreError

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_NO_TRANSACTION = "-- migration: no-transaction"
# Serialises concurrent migrators (two deploys, or Lambda retries of the custom resource).
_MIGRATION_LOCK = 0x77667200


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def in_transaction(self) -> bool:
        return not self.sql.startswith(_NO_TRANSACTION)

    def statements(self) -> list[str]:
        """The statements of a no-transaction migration, comments dropped."""
        found: list[str] = []
        current: list[str] = []
        for line in self.sql.splitlines():
            if not line.strip() or line.lstrip().startswith("--"):
                continue
            current.append(line)
            if line.rstrip().endswith(";"):
                found.append("\n".join(current))
                current = []
        if current:
            raise StoreError(f"migration {self.version:04d}: a statement does not end with ';'")
        return found


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
        raise StoreError(f"migrations must be numbered 0001.. without gaps, found {versions}")
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


def apply_migrations(conn: psycopg.Connection[object]) -> list[Migration]:
    """Apply pending migrations, in version order; return those applied.

    Safe to run concurrently and repeatedly: a session advisory lock serialises
    migrators, and each version is recorded in the same transaction as its DDL (after
    the last statement of a no-transaction migration, which may simply run again).

    Raises:
        StoreError: the connection is not in autocommit mode (each migration manages
            its own transaction).
    """
    if not conn.autocommit:
        raise StoreError("apply_migrations needs a connection in autocommit mode")
    applied: list[Migration] = []
    # A migration may legitimately run longer than the engine's statement timeout.
    conn.execute("SET statement_timeout = 0")
    conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
    try:
        _ensure_version_table(conn)
        for mig in pending_migrations(conn):
            if mig.in_transaction:
                with conn.transaction():
                    conn.execute(mig.sql.encode())
                    _record(conn, mig)
            else:
                for statement in mig.statements():
                    conn.execute(statement.encode())
                _record(conn, mig)
            applied.append(mig)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
        conn.execute("RESET statement_timeout")
    return applied


def _record(conn: psycopg.Connection[object], mig: Migration) -> None:
    conn.execute(
        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
        (mig.version, mig.name),
    )
