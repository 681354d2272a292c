"""Numbered, idempotent schema migrations recorded in schema_migrations.

A migration runs in one transaction with its version record, unless its first line is
`-- migrate: no-transaction`: then its statements run one by one outside any
transaction (what CREATE INDEX CONCURRENTLY needs, so an index can be built on a big
table without blocking its writers), and its version is recorded after the last one.
Such a migration must be safe to run again from the start (IF NOT EXISTS everywhere; an
index a died build left INVALID is dropped and built again), and each of its
statements ends with `;` at the end of a line.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import tuple_row

from ..errors import StoreError

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# Serialises concurrent migrators (two deploys, or Lambda retries of the custom resource).
_MIGRATION_LOCK = 0x77667200
# First line of a migration that must run outside a transaction, one statement at a time:
# CREATE INDEX CONCURRENTLY builds an index on a big table without blocking its writers,
# and cannot run inside a transaction block.
_NO_TRANSACTION = "-- migrate: no-transaction"
# First line of a file that only holds a number for a migration another branch brings
# (branches take numbers in the order they will land): the numbering stays gap-free,
# and the file is never applied nor recorded, so the real migration of that number
# still runs on a database this release was deployed to. The real one replaces it when
# the branches meet (two files of one number fail all_migrations).
_RESERVED = "-- migrate: reserved"
_CONCURRENT_INDEX = re.compile(
    r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.IGNORECASE
)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def transactional(self) -> bool:
        """False for a migration marked `-- migrate: no-transaction` on its first line."""
        return not self.sql.lstrip().startswith(_NO_TRANSACTION)

    def statements(self) -> list[str]:
        """The migration's statements (split at a `;` that ends a line), comments dropped."""
        found = []
        for chunk in re.split(r";\s*$", self.sql, flags=re.MULTILINE):
            code = "\n".join(
                line for line in chunk.splitlines() if not line.strip().startswith("--")
            ).strip()
            if code:
                found.append(code)
        return found


def all_migrations(folder: Traversable | None = None) -> list[Migration]:
    """Every migration shipped with the engine (or in `folder`), in version order,
    without the reserved numbers.

    Raises:
        StoreError: the files are not numbered 0001.. without gaps and repeats.
    """
    folder = folder or resources.files(__package__).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        m = _FILE.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), entry.read_text()))
    found.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in found]
    if versions != list(range(1, len(found) + 1)):
        raise StoreError(f"migrations must be numbered 0001.. without gaps, found {versions}")
    return [mig for mig in found if not mig.sql.lstrip().startswith(_RESERVED)]


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

    The migration that timed out left nothing behind (its transaction rolled back; a
    no-transaction migration is idempotent and runs again, rebuilding an index build it
    left INVALID); the migrations before it stay applied and recorded."""


def _milliseconds(seconds: float) -> str:
    """A timeout setting; 0 is no limit."""
    return "0" if seconds == 0 else f"{max(1, int(seconds * 1000))}ms"


def _record(conn: psycopg.Connection[object], mig: Migration) -> None:
    conn.execute(
        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (mig.version, mig.name)
    )


def _apply_without_transaction(conn: psycopg.Connection[object], mig: Migration) -> None:
    """Run a no-transaction migration statement by statement (autocommit).

    Its statements must be idempotent (IF NOT EXISTS): a migrator that died half-way
    (or whose lock wait or statement timed out) runs them all again. A concurrent index
    build that died leaves an INVALID index behind, which IF NOT EXISTS would keep; those
    are dropped first and built again.
    """
    names = _CONCURRENT_INDEX.findall(mig.sql)
    cur = conn.cursor(row_factory=tuple_row)
    invalid = cur.execute(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE NOT i.indisvalid AND c.relname = ANY(%s)",
        (names,),
    ).fetchall()
    for (name,) in invalid:
        conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"'.encode())
    for statement in mig.statements():
        conn.execute(statement.encode())
    _record(conn, mig)


@contextmanager
def _session_limits(
    conn: psycopg.Connection[object],
    lock_timeout_s: float | None,
    statement_timeout_s: float | None,
) -> Iterator[None]:
    """Set lock_timeout / statement_timeout for the session (no-transaction migrations run
    outside any transaction, so SET LOCAL cannot reach them) and put back the values it
    found, so the limits never outlive the migration on a connection that is reused."""
    limits = {
        name: seconds
        for name, seconds in (
            ("lock_timeout", lock_timeout_s),
            ("statement_timeout", statement_timeout_s),
        )
        if seconds is not None
    }
    cur = conn.cursor(row_factory=tuple_row)
    before: dict[str, str] = {}
    for name, seconds in limits.items():
        row = cur.execute("SELECT current_setting(%s)", (name,)).fetchone()
        before[name] = str(row[0]) if row else "0"
        conn.execute("SELECT set_config(%s, %s, false)", (name, _milliseconds(seconds)))
    try:
        yield
    finally:
        if not conn.closed and not conn.broken:
            for name, value in before.items():
                conn.execute("SELECT set_config(%s, %s, false)", (name, value))


def apply_migrations(
    conn: psycopg.Connection[object],
    *,
    lock_timeout_s: float | None = None,
    statement_timeout_s: float | None = None,
) -> list[Migration]:
    """Apply pending migrations, each in its own transaction; return those applied.

    Safe to run concurrently and repeatedly: a session-level advisory lock serialises
    migrators and each version is recorded in the same transaction as its DDL (a
    no-transaction migration records it after its last statement).

    Args:
        conn: a connection outside any transaction.
        lock_timeout_s: give up waiting for any lock (the migrators' advisory lock, a
            table lock held by a running function, the old transactions a concurrent
            index build waits for) after this long. A DDL statement that waits for its
            lock queues every later query on that table behind it, so in a live system
            the wait must be short; the caller retries.
        statement_timeout_s: give up on any single statement after this long (None: no
            limit; the statement timeout every engine session carries, see
            store.database.connect, is lifted for the migration).

    Raises:
        psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled: a timeout hit;
            the migration it hit left nothing behind (see MigrationTimeout), the ones
            before it are applied. The session's own limits are restored either way.
    """
    applied: list[Migration] = []
    autocommit = conn.autocommit
    conn.autocommit = True
    try:
        statement_limit = 0.0 if statement_timeout_s is None else statement_timeout_s
        with _session_limits(conn, lock_timeout_s, statement_limit):
            # A session lock, not a transaction's: no-transaction migrations run under it.
            conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
            try:
                _ensure_version_table(conn)
                for mig in pending_migrations(conn):
                    if mig.transactional:
                        with conn.transaction():
                            conn.execute(mig.sql.encode())
                            _record(conn, mig)
                    else:
                        _apply_without_transaction(conn, mig)
                    applied.append(mig)
            finally:
                if not conn.closed and not conn.broken:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    finally:
        if not conn.closed and not conn.broken:
            conn.autocommit = autocommit
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
        MigrationTimeout: the budget ran out; the migration it stopped at left nothing
            behind, and the next attempt (the next deploy) continues from there.
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
