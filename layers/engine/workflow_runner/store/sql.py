"""Named-query execution on one connection, and how driver errors are classified.

The one place that runs SQL text; the stores of this package call it by query name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg

from ..errors import StoreError, StreamConflict, TransientStoreError
from .queries import query

# SQLSTATE classes worth a retry: connection exceptions (08), serialization failure and
# deadlock (40001, 40P01), operator intervention such as admin shutdown or failover (57P),
# insufficient resources (53), query canceled by statement timeout (57014).
# Of those, the server rolling a transaction back to let another through.
_LOST_RACE = ("40001", "40P01")
_TRANSIENT_PREFIXES = ("08", *_LOST_RACE, "57P", "53", "57014")


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


# The unique key of a stream's versions: an insert that meets it lost a race for them.
_STREAM_VERSION_KEY = "wf_events_stream_version_key"


def wrap_error(error: psycopg.Error) -> StoreError:
    """A driver error as the engine's StoreError (TransientStoreError when retryable,
    StreamConflict when an append met an event already at its version)."""
    sqlstate = getattr(error, "sqlstate", None)
    message = f"database error ({sqlstate or type(error).__name__}): {error}"
    if is_transient(error):
        return TransientStoreError(message, lost_race=sqlstate in _LOST_RACE)
    if (
        isinstance(error, psycopg.errors.UniqueViolation)
        and error.diag.constraint_name == _STREAM_VERSION_KEY
    ):
        return StreamConflict(message)
    return StoreError(message)


def array_literal(values: Sequence[str | int]) -> str:
    """`values` as a PostgreSQL array literal, for a parameter the query casts to an
    array type (`%(ids)s::uuid[]`): every element quoted, with backslashes and double
    quotes escaped, so any string stays one element. On the hot paths (a resume batch's
    reads, the projection's deletes) it replaces psycopg's list dumper, which
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


def events_params(events: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The parameters of a statement on several stored events at once (the inbox's
    batch reads and marks): the (tenant, event id) pairs as two arrays."""
    return {
        "tenant_ids": array_literal([t for t, _ in events]),
        "event_ids": array_literal([e for _, e in events]),
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


class _Deferral:
    """The block of `Sql.deferred`: a class, not a generator, since a resume enters one
    per pass, nested in its batch's (through Store.pipeline that was two generators'
    enter and exit, about 2.5 us)."""

    __slots__ = ("_outermost", "_sql")

    def __init__(self, sql: Sql) -> None:
        self._sql = sql
        self._outermost = False

    def __enter__(self) -> None:
        if self._sql._queue is None:
            self._sql._queue = []
            self._outermost = True

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: object
    ) -> None:
        if not self._outermost:
            return
        sql = self._sql
        queue, sql._queue = sql._queue, None
        if queue:
            try:
                sql._send(queue)
            except StoreError:
                if kind is None:
                    raise


class _Queued:
    """A statement held back by `Sql.deferred` until its block ends or a read needs the
    connection; `cursor` is set once it has gone out."""

    __slots__ = ("cursor", "params", "sql")

    def __init__(self, sql: str, params: dict[str, Any]) -> None:
        self.sql = sql
        self.params = params
        self.cursor: psycopg.Cursor[dict[str, Any]] | None = None


class Sql:
    """Runs named queries on one connection; driver errors become StoreError.

    Shared by the stores of this package; nothing outside it sees a query name.
    """

    def __init__(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        self.conn = conn
        self._queue: list[_Queued] | None = None  # None: not inside `deferred`
        self.statements_sent = 0  # statements that went out on this connection so far

    def all(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self._queue:
            return self._with_queued([(name, params)])[0]
        try:
            self.statements_sent += 1
            return self.conn.execute(query(name), params).fetchall()
        except psycopg.Error as error:
            raise wrap_error(error) from error

    def one(self, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if self._queue:
            rows = self._with_queued([(name, params)])[0]
            return rows[0] if rows else None
        try:
            self.statements_sent += 1
            return self.conn.execute(query(name), params).fetchone()
        except psycopg.Error as error:
            raise wrap_error(error) from error

    def run(self, name: str, params: dict[str, Any]) -> int:
        """Execute and return the number of rows touched (-1 inside `deferred`, where
        the statement has not gone out yet)."""
        if self._queue is not None:
            self._queue.append(_Queued(query(name), params))
            return -1
        try:
            self.statements_sent += 1
            return self.conn.execute(query(name), params).rowcount
        except psycopg.Error as error:
            raise wrap_error(error) from error

    def batch(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[list[dict[str, Any]]]:
        """Run several named queries in one round trip (a pipeline); each one's rows, in
        order (empty for a statement that returns none)."""
        return self._with_queued(calls)

    def batch_generic(
        self, calls: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[list[dict[str, Any]]]:
        """`batch`, its statements run on their generic plans once prepared and the
        plan choice in force before them restored after them, in the same round trip. For
        statements whose arrays are short: the server plans them anew on every run
        (their custom plans, costed for the few elements given, always beat the generic
        plan costed for ten), which costs more than running them. Inside a transaction
        only (outside one the settings last one statement each: the batch runs as
        `batch` would)."""
        rows = self._with_queued(
            [
                ("generic_plans_in_transaction", {}),
                *calls,
                ("chosen_plans_in_transaction", {}),
            ]
        )
        return rows[1:-1]

    def send(self, name: str, params: dict[str, Any]) -> Callable[[], list[dict[str, Any]]]:
        """Execute without reading: inside `deferred` the statement goes out with the
        block's others. The returned function reads its rows (sending what is held
        back first, if it has not gone out yet)."""
        queued = _Queued(query(name), params)
        if self._queue is not None:
            self._queue.append(queued)
        else:
            self._send([queued])

        def rows() -> list[dict[str, Any]]:
            if queued.cursor is None:
                self.flush()
            if queued.cursor is None:
                raise StoreError(f"{name}: dropped with its rolled-back transaction, never sent")
            try:
                return queued.cursor.fetchall()
            except psycopg.Error as error:
                raise wrap_error(error) from error

        return rows

    def deferred(self) -> AbstractContextManager[None]:
        """Hold back the statements that need no answer (`run`, `send`) and send them
        together: when the block ends, or with the next read (`all`, `one`, `batch`),
        which needs them to have run first. One statement goes out alone, several in
        one pipeline: one round trip either way, and a block that ends up sending
        nothing costs nothing. A block inside another is part of it. Errors surface
        where the statements go out. If the block raises, what it held back still goes
        out (as a pipeline's statements would), unless a transaction inside it rolled
        back (see `discard`)."""
        return _Deferral(self)

    @contextmanager
    def ahead(self) -> Iterator[None]:
        """Inside `deferred`: what the block sends goes out before the statements held
        back when it began (a read inside sends only what the block held back itself),
        which stay held back after it. Outside `deferred` it changes nothing."""
        held = self._queue
        if held is None:
            yield
            return
        self._queue = []
        try:
            yield
        finally:
            self._queue = [*(self._queue or []), *held]

    def held_back(self) -> int:
        """How many statements `deferred` holds back now."""
        return len(self._queue or ())

    def flush(self) -> None:
        """Send what `deferred` holds back now (before a transaction's boundary)."""
        if self._queue:
            queue, self._queue = self._queue, []
            self._send(queue)

    def discard(self) -> None:
        """Drop what `deferred` holds back (its transaction rolled back)."""
        if self._queue:
            self._queue = []

    def _with_queued(
        self, calls: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[list[dict[str, Any]]]:
        """What is held back, then `calls`, in one pipeline; the rows of `calls`."""
        queue, self._queue = (self._queue or []), ([] if self._queue is not None else None)
        reads = [_Queued(query(name), params) for name, params in calls]
        self._send([*queue, *reads])
        try:
            # pgresult, not description: description builds a Column per field.
            return [
                r.cursor.fetchall() if r.cursor is not None and _has_rows(r.cursor) else []
                for r in reads
            ]
        except psycopg.Error as error:
            raise wrap_error(error) from error

    def _send(self, statements: Sequence[_Queued]) -> None:
        if not statements:
            return
        self.statements_sent += len(statements)
        try:
            if len(statements) == 1:
                statements[0].cursor = self.conn.execute(statements[0].sql, statements[0].params)
                return
            with self.conn.pipeline():
                for statement in statements:
                    statement.cursor = self.conn.execute(statement.sql, statement.params)
        except psycopg.Error as error:
            raise wrap_error(error) from error
