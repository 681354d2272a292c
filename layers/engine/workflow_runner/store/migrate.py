"""Numbered, idempotent schema migrations recorded in schema_migrations."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import psycopg
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
    """Apply pending migrations, each in its own transaction; return those applied.

    Safe to run concurrently and repeatedly: an advisory lock serialises migrators and
    each version is recorded in the same transaction as its DDL.
    """
    applied: list[Migration] = []
    with conn.transaction():
        # A migration may legitimately run longer than the engine's statement timeout.
        conn.execute("SET LOCAL statement_timeout = 0")
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
