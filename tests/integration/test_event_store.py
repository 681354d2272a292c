"""Streams: optimistic concurrency and commit-order catch-up reads."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from workflow_runner.errors import StoreError
from workflow_runner.store import (
    NewChild,
    NewEvent,
    PassWrite,
    RunEnd,
    RunSummaryWrite,
    Store,
    StoredEvent,
    connect,
)

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


def _read_after(
    store: Store, xid: str, position: int, limit: int, payload_types: Sequence[str] = ()
) -> list[StoredEvent]:
    """A catch-up read as the projection does it: the horizon first, in one transaction."""
    with store.transaction():
        horizon = store.checkpoints.horizon()
        return store.streams.read_after(xid, position, limit, horizon, payload_types)


def test_catch_up_reads_the_payload_of_the_types_asked_for_only(store: Store) -> None:
    run = str(uuid.uuid4())
    events = [
        NewEvent("kept", {"n": 1}, {"source": "test"}),
        NewEvent("left", {"n": 2}, {"source": "test"}),
        NewEvent("kept", {"n": 3}),
    ]
    assert store.streams.append(TENANT, run, "workflow-run", 0, events, NOW)
    read = _read_after(store, "0", 0, 100, ["kept"])
    assert [(e.type, e.version, e.stream_id) for e in read] == [
        ("kept", 1, run),
        ("left", 2, run),
        ("kept", 3, run),
    ]
    assert [e.payload for e in read] == [{"n": 1}, {}, {"n": 3}]
    assert all(e.metadata == {} for e in read)  # the projection reads no metadata
    # Everything else of a left-out event is as stored.
    stored = store.streams.load(TENANT, run)
    assert [(e.position, e.recorded_at) for e in read] == [
        (e.position, e.recorded_at) for e in stored
    ]
    assert all(e.xid for e in read)  # the checkpoint is taken from the last one read


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
            assert _read_after(store, "0", 0, 100) == []
        read = _read_after(store, "0", 0, 100)
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
        batch = _read_after(reader, xid, position, 37)
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


def test_record_passes_writes_several_runs_and_settles_the_ended_ones_in_one_statement(
    store: Store,
) -> None:
    waiting, child, parent = (str(uuid.uuid4()) for _ in range(3))
    child_join, parent_join = str(uuid.uuid4()), str(uuid.uuid4())
    for run in (waiting, child, parent):
        store.streams.append(TENANT, run, "workflow-run", 0, [NewEvent("started", {})], NOW)
    other = str(uuid.uuid4())  # waits for `child` as a map child
    store.children.insert_join(
        TENANT, child_join, other, "map", "kid", 2, 1, False, [NewChild(0, child, "k", {})], NOW
    )
    store.children.insert_join(
        TENANT, parent_join, parent, "call", "kid", 2, 1, False, [NewChild(0, other, "k", {})], NOW
    )
    store.conn.execute("UPDATE run_children SET status = 'running'")

    def summary(run: str, status: str) -> RunSummaryWrite:
        return RunSummaryWrite(TENANT, run, "wf", status, "fp", "go", workflow_version=3)

    closed = store.streams.record_passes(
        [
            PassWrite(
                TENANT,
                waiting,
                1,
                [NewEvent("resumed", {}), NewEvent("waiting", {"n": 1})],
                summary(waiting, "waiting"),
                ({"x": 1, "gone": None}, {"evt": "e-1"}),
            ),
            PassWrite(
                TENANT,
                child,
                1,
                [NewEvent("completed", {})],
                summary(child, "completed"),
                ended=RunEnd("completed", None),
            ),
            PassWrite(TENANT, parent, 1, ended=RunEnd("failed", None, "child_failed")),
        ],
        NOW,
    )

    assert closed() == [(TENANT, parent, parent_join)]
    assert [(e.version, e.type) for e in store.streams.load(TENANT, waiting)] == [
        (1, "started"),
        (2, "resumed"),
        (3, "waiting"),
    ]
    results = store.results.of_run(TENANT, waiting)
    assert (results.values, results.awaited_refs) == (
        {"x": 1, "gone": None, "evt": None},
        {"evt": "e-1"},
    )
    runs = {r.run_id: (r.status, r.version) for r in store.runs.for_tenant(TENANT)}
    assert runs == {waiting: ("waiting", 3), child: ("completed", 2)}  # `parent`: no summary
    settled = store.conn.execute(
        "SELECT status, result IS NULL AS sql_null, result = 'null'::jsonb AS json_null"
        " FROM run_children WHERE child_run_id = %s",
        [child],
    ).fetchone()
    assert settled == {"status": "completed", "sql_null": False, "json_null": True}


def test_record_passes_refuses_events_at_a_taken_version_and_writes_nothing(
    store: Store,
) -> None:
    """A pass writes after the version it holds, so its events cannot meet a taken version;
    if they ever did, the write fails whole instead of dropping the events that collide."""
    run = str(uuid.uuid4())
    store.streams.append(
        TENANT, run, "workflow-run", 0, [NewEvent("started", {}), NewEvent("other", {})], NOW
    )
    write = PassWrite(
        TENANT,
        run,
        1,
        [NewEvent("resumed", {}), NewEvent("completed", {})],
        RunSummaryWrite(TENANT, run, "wf", "completed", "fp", "go", workflow_version=1),
        ({"x": 1}, {}),
    )
    with pytest.raises(StoreError), store.transaction():
        store.streams.record_passes([write], NOW)()
    assert [e.type for e in store.streams.load(TENANT, run)] == ["started", "other"]
    assert store.runs.for_tenant(TENANT) == []
    assert store.results.of_run(TENANT, run).values == {}


def test_array_parameters_keep_every_element_whole(store: Store) -> None:
    """The hot paths write array parameters as literals (store/sql.array_literal); each
    string must come back as the one element it was, whatever it holds."""
    from workflow_runner.store.sql import array_literal

    texts = ['a"b', "c\\d", "", "x,y", "{z}", " sp ", "NULL", "é", '{"k": "v\\\\ \\""}']
    ids = [str(uuid.uuid4()), str(uuid.uuid4()).upper()]
    conn = store.conn
    for _ in range(7):  # past psycopg's prepare threshold: prepared statements too
        assert conn.execute(
            "SELECT %(v)s::text[] AS v", {"v": array_literal(texts)}
        ).fetchone() == {"v": texts}
        row = conn.execute("SELECT %(v)s::uuid[] AS v", {"v": array_literal(ids)}).fetchone()
        assert row == {"v": [uuid.UUID(i) for i in ids]}
        row = conn.execute("SELECT %(v)s::int[] AS v", {"v": array_literal([3, -1])}).fetchone()
        assert row == {"v": [3, -1]}
        assert conn.execute("SELECT %(v)s::uuid[] AS v", {"v": array_literal([])}).fetchone() == {
            "v": []
        }


def test_one_event_to_many_streams_keeps_payloads_that_need_escaping(store: Store) -> None:
    from workflow_runner.stream import StepResumed

    runs = sorted(str(uuid.uuid4()) for _ in range(3))
    for run in runs:
        assert store.streams.append(TENANT, run, "workflow-run", 0, [NewEvent("a", {})], NOW)
    awkward = 'quote " backslash \\ brace } comma , é'
    facts = [
        StepResumed(
            step_index=i,
            path=None,
            retry_attempt=None,
            suspension_version=1,
            awaited_event_id=f"{awkward} {i}",
            resumed_by="event",
        )
        for i in range(3)
    ]
    won = store.streams.append_to_many(
        TENANT, "workflow-run", [(run, 1, fact) for run, fact in zip(runs, facts, strict=True)], NOW
    )
    assert won == set(runs)
    for run, fact in zip(runs, facts, strict=True):
        stored = store.streams.load(TENANT, run)[-1]
        assert stored.payload == fact.to_payload()


def test_jsonb_parameters_are_stored_as_json_dumps_writes_them(store: Store) -> None:
    """The engine's connections encode jsonb with pydantic-core; a None dict key is the
    one case it writes differently from json.dumps ("None" against "null")."""
    stream = str(uuid.uuid4())
    payload = {None: 1, "None": 2, True: 3, 2: [1.5, "é"], "n": None}
    assert store.streams.append(TENANT, stream, "workflow-run", 0, [NewEvent("a", payload)], NOW)
    (stored,) = store.streams.load(TENANT, stream)
    assert stored.payload == {"null": 1, "None": 2, "true": 3, "2": [1.5, "é"], "n": None}


def test_claims_answer_each_run_in_the_spelling_it_was_asked_in(store: Store) -> None:
    """append_to_runs names the runs that got their event as the caller spelled them,
    whatever uuid spelling PostgreSQL accepted (canonical ones skip the re-spelling)."""
    from workflow_runner.stream import StepResumed

    ids = [uuid.uuid4() for _ in range(5)]
    hexes = [u.hex for u in ids]
    spellings = [
        str(ids[0]),  # canonical
        str(ids[1]).upper(),
        "{" + str(ids[2]) + "}",
        hexes[3],  # no hyphens
        # 36 characters with four hyphens, not where PostgreSQL prints them
        "-".join([hexes[4][:4], hexes[4][4:12], hexes[4][12:20], hexes[4][20:28], hexes[4][28:]]),
    ]
    assert len(spellings[4]) == 36
    for run in ids:
        assert store.streams.append(TENANT, str(run), "workflow-run", 0, [NewEvent("a", {})], NOW)
    fact = StepResumed(
        step_index=0,
        path=None,
        retry_attempt=None,
        suspension_version=1,
        awaited_event_id=None,
        resumed_by="timer",
    )
    won = store.streams.append_to_runs([(TENANT, s, 1, fact) for s in spellings], NOW)
    assert won == {(TENANT, s) for s in spellings}
    again = store.streams.append_to_runs([(TENANT, s, 1, fact) for s in spellings], NOW)
    assert again == set()  # the version is taken now: nobody wins twice
    for run in ids:
        assert [e.version for e in store.streams.load(TENANT, str(run))] == [1, 2]
