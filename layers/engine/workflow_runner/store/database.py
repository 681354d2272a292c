"""The Store: one psycopg connection, its transactions, and the small stores on it.

Everything the engine reads or writes goes through a typed method of one of the
stores below (`store.streams.append(...)`, `store.pending.due(...)`); each runs named
queries from the `queries*.sql` files beside this module and returns typed rows. This
package is the only one that imports the database driver.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import cached_property
from typing import Any

import psycopg
import pydantic_core
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row
from psycopg.types.json import set_json_dumps, set_json_loads

from ..flow.store import FlowStore
from .callbacks import CallbackStore
from .checkpoints import CheckpointStore
from .children import ChildStore
from .console import ConsoleStore
from .cron import CronStore
from .definitions import DefinitionStore
from .erasure import ErasureStore
from .hosts import DefinitionHostStore
from .inbox import InboxStore
from .local import LocalStore
from .migrate import Migration, apply_migrations, apply_migrations_within
from .operator import OperatorStore
from .outbox import OutboxStore
from .pending import PendingStore
from .purge import PurgeStore
from .results import ResultStore
from .runs import RunStore
from .sql import Sql, wrap_error
from .streams import StreamStore
from .tasks import TaskStore

# Every engine connection carries this application name (see _session_options).
APPLICATION_NAME = "workflow-runner"
# Longer than any statement or pause inside one of the engine's transactions; short
# enough that a session left in a transaction cannot hold the projection for long.
DEFAULT_STATEMENT_TIMEOUT_SECONDS = 60.0
DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS = 60.0


class Store:
    """One database connection (autocommit; transactions are explicit) and its stores.

    A store method used alone commits on its own; inside `transaction()` it is part of
    that transaction.
    """

    def __init__(self, conn: psycopg.Connection[dict[str, Any]], sql_type: type[Sql] = Sql) -> None:
        self._conn = conn
        self._sql = sql_type(conn)
        # jsonb parameters and columns through pydantic-core's JSON (Rust) instead of the
        # json module: a tenth of a resume's Python went to encoding and decoding. What a
        # workflow produces is still checked with json.dumps first
        # (storable.check_storable), so what counts as JSON does not change. Set here, not
        # in connect(), so every Store encodes its batch records (instants included) the
        # same way, whoever opened its connection.
        set_json_dumps(_to_json, conn)
        set_json_loads(pydantic_core.from_json, conn)

    # --- the stores ------------------------------------------------------------------

    @cached_property
    def streams(self) -> StreamStore:
        return StreamStore(self._sql)

    @cached_property
    def checkpoints(self) -> CheckpointStore:
        return CheckpointStore(self._sql)

    @cached_property
    def inbox(self) -> InboxStore:
        return InboxStore(self._sql)

    @cached_property
    def runs(self) -> RunStore:
        return RunStore(self._sql)

    @cached_property
    def pending(self) -> PendingStore:
        return PendingStore(self._sql)

    @cached_property
    def results(self) -> ResultStore:
        return ResultStore(self._sql)

    @cached_property
    def tasks(self) -> TaskStore:
        return TaskStore(self._sql)

    @cached_property
    def callbacks(self) -> CallbackStore:
        return CallbackStore(self._sql)

    @cached_property
    def children(self) -> ChildStore:
        return ChildStore(self._sql)

    @cached_property
    def definitions(self) -> DefinitionStore:
        return DefinitionStore(self._sql)

    @cached_property
    def hosts(self) -> DefinitionHostStore:
        return DefinitionHostStore(self._sql)

    @cached_property
    def outbox(self) -> OutboxStore:
        return OutboxStore(self._sql)

    @cached_property
    def cron(self) -> CronStore:
        return CronStore(self._sql)

    @cached_property
    def operator(self) -> OperatorStore:
        return OperatorStore(self._sql)

    @cached_property
    def console(self) -> ConsoleStore:
        return ConsoleStore(self._sql)

    @cached_property
    def erasure(self) -> ErasureStore:
        return ErasureStore(self._sql)

    @cached_property
    def purge(self) -> PurgeStore:
        return PurgeStore(self._sql)

    @cached_property
    def local(self) -> LocalStore:
        return LocalStore(self._sql)

    @cached_property
    def flow(self) -> FlowStore:
        return FlowStore(self._sql)

    # --- plumbing ----------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction (a savepoint when nested); driver errors become StoreError.

        Inside `pipeline()`, what the block holds back goes out before the transaction
        begins and before it commits; what the transaction held back when it rolls back
        is dropped with it."""
        self._sql.flush()
        outermost = not self.in_transaction
        if outermost:
            self.definitions.transaction_began()
        committed = False
        try:
            with self._conn.transaction():
                try:
                    yield
                    self._sql.flush()
                except BaseException:
                    self._sql.discard()
                    raise
            committed = True
        except psycopg.Error as error:
            raise wrap_error(error) from error
        finally:
            if outermost:
                self.definitions.transaction_ended(committed)

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (a `transaction()` block now is a savepoint of
        it, and a failure rolls back the caller's work too)."""
        return self._conn.info.transaction_status != TransactionStatus.IDLE

    def pipeline(self) -> AbstractContextManager[None]:
        """Send the statements inside that need no answer together: one round trip.

        Only for statements whose results are not read inside the block (a read sends
        what is held back with it, in one round trip); errors surface when the block
        ends. A block inside another is part of it: its statements ride the outer
        block's round trip. A block that sends one statement sends it alone, without a
        pipeline's extra messages (see Sql.deferred).
        """
        return self._sql.deferred()

    def ahead(self) -> AbstractContextManager[None]:
        """Inside `pipeline()`: what the block sends goes out before what the pipeline
        held back when the block began (see Sql.ahead)."""
        return self._sql.ahead()

    def held_back(self) -> int:
        """How many statements `pipeline()` holds back now."""
        return self._sql.held_back()

    def discard_held(self) -> None:
        """Drop what `pipeline()` holds back (the caller rolls its transaction back)."""
        self._sql.discard()

    @property
    def statements_sent(self) -> int:
        """Statements that went out on this connection so far (a count that tells
        whether a block of work reached the database at all)."""
        return self._sql.statements_sent

    def ping(self) -> None:
        """A round trip that proves the connection works (raises StoreError if not)."""
        self._sql.one("ping_connection", {})

    def migrate(
        self, *, budget_seconds: float | None = None, lock_timeout_seconds: float = 5.0
    ) -> list[Migration]:
        """Apply pending schema migrations; return those applied (see migrate.py).

        Args:
            budget_seconds: None waits as long as the migrations take (the CLI); a
                number bounds every lock wait by `lock_timeout_seconds`, retries lock
                timeouts and stops within it (a deploy on a live database).

        Raises:
            MigrationTimeout: the budget ran out.
        """
        try:
            if budget_seconds is None:
                return apply_migrations(self._conn)
            return apply_migrations_within(
                self._conn, budget_seconds, lock_timeout_s=lock_timeout_seconds
            )
        except psycopg.Error as error:
            raise wrap_error(error) from error

    @property
    def conn(self) -> psycopg.Connection[dict[str, Any]]:
        """The driver connection, for tests and tools that inspect the database with
        their own SQL. Engine code never uses it: it goes through the stores."""
        return self._conn

    @property
    def dsn(self) -> str:
        """The connection's parameters (password omitted), for display and reuse."""
        return str(self._conn.info.dsn)

    def close(self) -> None:
        self._conn.close()

    @property
    def closed(self) -> bool:
        return bool(self._conn.closed) or self._conn.broken


def _session_options(
    url: str, statement_timeout_seconds: float, idle_in_transaction_timeout_seconds: float
) -> dict[str, Any]:
    """Startup parameters of an engine connection: its name and its timeouts.

    The name is how the pending projection tells the engine's own transactions from
    everybody else's (see projection_horizon in queries.sql), so it is always set. The
    timeouts bound how long one of our transactions can hold the projection back (a
    Lambda frozen or killed mid-transaction leaves its session idle in transaction);
    they go in as startup options, appended to any the URL carries (0: server default).
    """
    given = conninfo_to_dict(url)
    name = str(given.get("application_name") or "")
    params: dict[str, Any] = {
        "application_name": name if name.startswith(APPLICATION_NAME) else APPLICATION_NAME
    }
    options = [str(given["options"])] if given.get("options") else []
    for setting, seconds in (
        ("statement_timeout", statement_timeout_seconds),
        ("idle_in_transaction_session_timeout", idle_in_transaction_timeout_seconds),
    ):
        if seconds > 0:
            options.append(f"-c {setting}={max(1, round(seconds * 1000))}")
    if options:
        params["options"] = " ".join(options)
    return params


def connect(
    url: str,
    sql_type: type[Sql] = Sql,
    statement_timeout_seconds: float = DEFAULT_STATEMENT_TIMEOUT_SECONDS,
    idle_in_transaction_timeout_seconds: float = DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS,
    prepared_statements: bool = True,
    **kwargs: Any,
) -> Store:
    """Open a Store on a new autocommit connection, named as the engine's.

    Args:
        url: a libpq URL or key=value string.
        sql_type: how statements run (tests substitute one that injects faults).
        statement_timeout_seconds: the longest a statement may run (0: server default).
        idle_in_transaction_timeout_seconds: the longest a transaction may sit idle
            before the server ends the session (0: server default).
        prepared_statements: let psycopg prepare the statements the connection runs
            often (its default: from the fifth run on); False prepares none, for a
            connection pooler or proxy that cannot carry them between sessions.
        kwargs: further connection parameters (e.g. connect_timeout).

    Raises:
        TransientStoreError: the server cannot be reached.
    """
    params = _session_options(url, statement_timeout_seconds, idle_in_transaction_timeout_seconds)
    try:
        if not prepared_statements:
            kwargs["prepare_threshold"] = None
        conn = psycopg.connect(url, autocommit=True, row_factory=dict_row, **params, **kwargs)
    except psycopg.Error as error:
        raise wrap_error(error) from error
    return Store(conn, sql_type)


def _to_json(value: Any) -> bytes | str:
    """JSON text of a jsonb parameter, as json.dumps would store it. pydantic-core
    differs in one case that reaches jsonb: a None dict key is "None" there and "null"
    in json.dumps (and so in what earlier releases stored); any output with such a key
    is written by json.dumps instead (a text key "None" takes that path too, harmlessly).
    There, values json.dumps has no encoding for (an instant in a batch's records) are
    encoded as pydantic-core encodes them everywhere else."""
    text = pydantic_core.to_json(value)
    if b'"None":' not in text:
        return text
    return json.dumps(value, default=pydantic_core.to_jsonable_python)
