"""Store.pipeline holds back the statements that need no answer and sends them together
(Sql.deferred): one statement alone, several in one pipeline, none when there are none;
a read sends them first; a transaction's boundaries keep them on their side of it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from workflow_runner.engine import project_pending
from workflow_runner.errors import StoreError
from workflow_runner.store import Sql, Store, connect
from workflow_runner.store.sql import _Queued

from tests.support import TENANT_A, TENANT_B

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
TENANT_C = "00000000-0000-4000-8000-00000000000c"


class RecordingSql(Sql):
    """Records each sending: the first words of the statements that went out together."""

    def __init__(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        super().__init__(conn)
        self.sent: list[list[str]] = []

    def _send(self, statements: Sequence[_Queued]) -> None:
        self.sent.append([_name(s.sql) for s in statements])
        super()._send(statements)


def _name(sql: str) -> str:
    # The queries start with comment lines; the statement's first word names its kind.
    body = [line for line in sql.splitlines() if line and not line.startswith("--")]
    return body[0].split()[0] if body else ""


@pytest.fixture
def recorded(db_url: str) -> Iterator[tuple[Store, RecordingSql]]:
    store = connect(db_url, sql_type=RecordingSql)
    try:
        sql = store._sql
        assert isinstance(sql, RecordingSql)
        yield store, sql
    finally:
        store.close()


def _tenants(db_url: str) -> set[str]:
    with psycopg.connect(db_url) as conn:
        return {str(r[0]) for r in conn.execute("SELECT tenant_id FROM tenants").fetchall()}


def test_held_statements_go_out_together_when_the_block_ends(
    recorded: tuple[Store, RecordingSql], db_url: str
) -> None:
    store, sql = recorded
    with store.pipeline():
        store.inbox.register_tenant(TENANT_A, NOW)
        store.inbox.register_tenant(TENANT_B, NOW)
        assert _tenants(db_url) == set()  # nothing has gone out yet
        assert sql.sent == []
    assert _tenants(db_url) == {TENANT_A, TENANT_B}
    assert sql.sent == [["INSERT", "INSERT"]]  # one pipeline, one round trip


def test_one_held_statement_goes_out_alone_and_an_empty_block_sends_nothing(
    recorded: tuple[Store, RecordingSql], db_url: str
) -> None:
    store, sql = recorded
    with store.pipeline():
        pass
    assert sql.sent == []
    with store.pipeline(), store.pipeline():  # an inner block is part of the outer one
        store.inbox.register_tenant(TENANT_A, NOW)
    assert sql.sent == [["INSERT"]]
    assert _tenants(db_url) == {TENANT_A}


def test_a_read_sends_what_is_held_back_first_in_the_same_round_trip(
    recorded: tuple[Store, RecordingSql],
) -> None:
    store, sql = recorded
    with store.pipeline():
        store.inbox.register_tenant(TENANT_A, NOW)
        assert store.inbox.tenants() == [TENANT_A]  # the read sees the held write
        store.inbox.register_tenant(TENANT_B, NOW)
    assert sql.sent == [["INSERT", "SELECT"], ["INSERT"]]


def test_a_transaction_keeps_held_statements_on_their_side_of_its_boundaries(
    recorded: tuple[Store, RecordingSql], db_url: str
) -> None:
    store, sql = recorded
    with store.pipeline():
        store.inbox.register_tenant(TENANT_A, NOW)  # before the transaction: goes out first
        with pytest.raises(RuntimeError), store.transaction():
            assert sql.sent == [["INSERT"]]
            store.inbox.register_tenant(TENANT_B, NOW)  # held inside, rolled back with it
            raise RuntimeError("the transaction fails")
        with store.transaction():
            store.inbox.register_tenant(TENANT_C, NOW)  # sent before COMMIT
        assert _tenants(db_url) == {TENANT_A, TENANT_C}
    assert sql.sent == [["INSERT"], ["INSERT"]]


def test_rows_of_a_statement_dropped_with_its_transaction_are_refused_clearly(
    recorded: tuple[Store, RecordingSql],
) -> None:
    store, sql = recorded
    with store.pipeline():
        with pytest.raises(RuntimeError), store.transaction():
            rows = sql.send("list_tenants", {})
            raise RuntimeError("rolled back before anything went out")
        with pytest.raises(StoreError, match="list_tenants: dropped with its rolled-back"):
            rows()
    assert sql.sent == []


def test_a_failing_block_still_sends_what_it_held_back_outside_a_transaction(
    recorded: tuple[Store, RecordingSql], db_url: str
) -> None:
    store, _ = recorded
    with pytest.raises(RuntimeError), store.pipeline():
        store.inbox.register_tenant(TENANT_A, NOW)
        raise RuntimeError("after the write")
    assert _tenants(db_url) == {TENANT_A}  # as a pipeline's statements would


def test_a_held_statement_that_fails_raises_where_it_goes_out(
    recorded: tuple[Store, RecordingSql],
) -> None:
    store, _ = recorded
    with pytest.raises(StoreError, match="22P02"), store.pipeline():  # not a uuid
        store.inbox.register_tenant("not-a-uuid", NOW)
    assert store.inbox.tenants() == []  # the connection is usable afterwards


class CountingConnection(psycopg.Connection[dict[str, Any]]):
    """Counts round trips: statements executed outside a pipeline, and pipelines."""

    round_trips = 0

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        if self.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF:
            self.round_trips += 1
        return super().execute(*args, **kwargs)

    def pipeline(self) -> Any:
        self.round_trips += 1
        return super().pipeline()


def test_a_catch_up_with_nothing_to_apply_costs_four_statement_round_trips(db_url: str) -> None:
    """Its start (horizon, checkpoint created and locked) goes in one round trip, the lag
    rides the last batch: the read, the look-backs and the lag are the other three."""
    conn = CountingConnection.connect(db_url, autocommit=True, row_factory=dict_row)
    store = Store(conn)
    try:
        project_pending(store, NOW)  # creates the checkpoint
        conn.round_trips = 0
        result = project_pending(store, NOW)
        assert (result.applied, result.lag_events) == (0, 0)
        assert conn.round_trips == 4  # besides BEGIN and COMMIT
    finally:
        store.close()
