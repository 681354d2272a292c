"""Named-query execution on one connection, and how driver errors are classified.

The one place that runs SQL text; the stores of this package call it by query name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from ..errors import StoreError, TransientStoreError
from .queries import query

# SQLSTATE classes worth a retry: connection exceptions (08), serialization failure and
# deadlock (40001, 40P01), operator intervention such as admin shutdown or failover (57P),
# insufficient resources (53), query canceled by statement timeout (57014).
_TRANSIENT_PREFIXES = ("08", "40001", "40P01", "57P", "53", "57014")


def is_transient(error: BaseException) -> bool:
    """True when a driver error is worth retrying on a fresh transaction."""
    if isinstance(error, TransientStoreError):
        return True
    if isinstance(error, (psycopg.OperationalError, psycopg.InterfaceError)) and not isinstance(
        error, psycopg.errors.QueryCanceled
    ):
        sqlstate = getattr(error, "sqlstate", None)
        return sqlstate is None or sqlstate.startswith(_TRANSIENT_PREFIXES)
    sqlstate = getattr(error, "sqlstate", None)
    return bool(sqlstate and sqlstate.startswith(_TRANSIENT_PREFIXES))


def wrap_error(error: psycopg.Error) -> StoreError:
    """A driver error as the engine's StoreError (TransientStoreError when retryable)."""
    message = (
        f"database error ({getattr(error, 'sqlstate', None) or type(error).__name__}): {error}"
    )
    if is_transient(error):
        return TransientStoreError(message)
    return StoreError(message)


def array_literal(values: Sequence[str | int]) -> str:
    """`values` as a PostgreSQL array literal, for a parameter the query casts to an
    array type (`%(ids)s::uuid[]`): every element quoted, with backslashes and double
    quotes escaped, so any string stays one element. On the hot paths (a resume batch's
    reads and claims, the projection's deletes) it replaces psycopg's list dumper, which
    costs about 1.5 µs of Python per element; this costs about a tenth of that."""
    if not values:
        return "{}"
    return (
        '{"' + '","'.join(str(v).replace("\\", "\\\\").replace('"', '\\"') for v in values) + '"}'
    )


def runs_params(runs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The parameters of a read for several runs at once (`load_run_tail`, `run_results`):
    the (tenant, run) pairs as two arrays. Each row comes back numbered `n` from 1."""
    return {
        "tenant_ids": array_literal([t for t, _ in runs]),
        "run_ids": array_literal([r for _, r in runs]),
    }


def rows_by_run(rows: Sequence[dict[str, Any]], count: int) -> list[list[dict[str, Any]]]:
    """The rows of a read for `count` runs (see runs_params), run by run in asked order."""
    grouped: list[list[dict[str, Any]]] = [[] for _ in range(count)]
    for row in rows:
        grouped[row["n"] - 1].append(row)
    return grouped


def _has_rows(cursor: psycopg.Cursor[Any]) -> bool:
    result = cursor.pgresult
    return result is not None and result.status == psycopg.pq.ExecStatus.TUPLES_OK


class Sql:
    """Runs named queries on one connection; driver errors become StoreError.

    Shared by the stores of this package; nothing outside it sees a query name.
    """

    def __init__(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        self.conn = conn

    def all(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        try:
            return self.conn.execute(query(name), params).fetchall()
        except psycopg.Error as error:
            raise wrap_error(error) from error

    def one(self, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return self.conn.execute(query(name), params).fetchone()
        except psycopg.Error as error:
            raise wrap_error(error) from error

    def run(self, name: str, params: dict[str, Any]) -> int:
        """Execute and return the number of rows touched."""
        try:
            return self.conn.execute(query(name), params).rowcount
        except psycopg.Error as error:
            raise wrap_error(error) from error

    def batch(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[list[dict[str, Any]]]:
        """Run several named queries in one round trip (a pipeline); each one's rows, in
        order (empty for a statement that returns none)."""
        try:
            with self.conn.pipeline():
                cursors = [self.conn.execute(query(name), params) for name, params in calls]
            # pgresult, not description: description builds a Column per field.
            return [c.fetchall() if _has_rows(c) else [] for c in cursors]
        except psycopg.Error as error:
            raise wrap_error(error) from error

    def send(self, name: str, params: dict[str, Any]) -> Callable[[], list[dict[str, Any]]]:
        """Execute without reading: inside a pipeline the statement rides the pipeline's
        round trip. Call the returned function after the pipeline ends for its rows."""
        try:
            cursor = self.conn.execute(query(name), params)
        except psycopg.Error as error:
            raise wrap_error(error) from error

        def rows() -> list[dict[str, Any]]:
            try:
                return cursor.fetchall()
            except psycopg.Error as error:
                raise wrap_error(error) from error

        return rows
