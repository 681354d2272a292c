"""Streams: optimistic concurrency and commit-order catch-up reads."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime

from workflow_runner.store import NewEvent, Store, connect

from tests.support import TENANT_A as TENANT
from tests.support import TENANT_B as OTHER

NOW = datetime(2026, 1, 5, tzinfo=UTC)


def test_append_at_a_taken_version_reports_the_conflict(store: Store) -> None:
    stream = str(uuid.uuid4())
    assert store.streams.append(TENANT, stream, "workflow-run", 0, [NewEvent("a", {})], NOW)
    assert not store.streams.append(TENANT, stream, "workflow-run", 0, [NewEvent("b", {})], NOW)
    assert store.streams.append(
        TENANT, stream, "workflow-run", 1, [NewEvent("b", {}), NewEvent("c", {})], NOW
    )
    assert [e.type for e in store.streams.load(TENANT, stream)] == ["a", "b", "c"]
    assert [e.version for e in store.streams.load(TENANT, stream)] == [1, 2, 3]


def test_the_same_stream_id_in_two_tenants_is_two_streams(store: Store) -> None:
    stream = str(uuid.uuid4())
    assert store.streams.append(TENANT, stream, "workflow-run", 0, [NewEvent("a", {"t": "A"})], NOW)
    assert store.streams.append(OTHER, stream, "workflow-run", 0, [NewEvent("a", {"t": "B"})], NOW)
    assert [e.payload["t"] for e in store.streams.load(TENANT, stream)] == ["A"]
    assert [e.payload["t"] for e in store.streams.load(OTHER, stream)] == ["B"]


def test_catch_up_does_not_return_events_of_a_transaction_still_in_flight(
    store: Store, db_url: str
) -> None:
    """A transaction that took a lower position but commits late must not be skipped."""
    slow = connect(db_url)
    try:
        with slow.transaction():
            slow.streams.append(
                TENANT, str(uuid.uuid4()), "workflow-run", 0, [NewEvent("slow", {})], NOW
            )
            store.streams.append(
                TENANT, str(uuid.uuid4()), "workflow-run", 0, [NewEvent("fast", {})], NOW
            )
            # The fast event committed with a higher position, but the slow
            # transaction is older and still open: the reader must wait for it.
            assert store.streams.read_after("0", 0, 100) == []
        read = store.streams.read_after("0", 0, 100)
        assert [e.type for e in read] == ["slow", "fast"]
    finally:
        slow.close()


def test_catch_up_under_concurrent_writers_skips_nothing_and_repeats_nothing(db_url: str) -> None:
    writers, per_writer = 6, 60
    errors: list[BaseException] = []

    def write(n: int) -> None:
        conn = connect(db_url)
        try:
            for i in range(per_writer):
                with conn.transaction():
                    conn.streams.append(
                        TENANT,
                        str(uuid.uuid4()),
                        "workflow-run",
                        0,
                        [NewEvent("e", {"w": n, "i": i})],
                        NOW,
                    )
                    if i % 7 == 0:
                        time.sleep(0.002)  # hold some transactions open across commits of others
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            conn.close()

    reader = connect(db_url)
    seen: list[int] = []
    xid, position = "0", 0
    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(seen) < writers * per_writer and time.monotonic() < deadline:
        batch = reader.streams.read_after(xid, position, 37)
        for e in batch:
            seen.append(e.position)
        if batch:
            xid, position = batch[-1].xid, batch[-1].position
        else:
            time.sleep(0.001)
    for t in threads:
        t.join()
    reader.close()
    assert not errors
    assert len(seen) == writers * per_writer
    assert len(set(seen)) == len(seen)
