"""EventWakeup's batch form: an SQS batch of awaited events through one set of
transactions (`wake_and_enqueue_many`), with the guarantees of one call per event."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

import pytest
from psycopg.rows import dict_row
from workflow_runner import DomainEvent, ManualClock, define_workflow, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.aws.inprocess import InMemoryResumeQueue
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine import pinning
from workflow_runner.engine.inbox_writes import store_inbox_events
from workflow_runner.engine.wakeup import _open_events as open_events
from workflow_runner.errors import StoreError
from workflow_runner.ports import ResumeRequest
from workflow_runner.store import Store, connect
from workflow_runner.store.queries import query

from tests.integration.test_held_statements import CountingConnection
from tests.integration.test_resume_loop import (
    _assert_ran_again_claiming_first,
    _resume_concurrently_after_the_read,
)
from tests.support import TENANT_A, TENANT_B, stream, trigger

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SALE = T0 + timedelta(minutes=5)


class _NoOffset(tzinfo):
    """A zone that knows no offset: Python counts its times as naive."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None


def _field_is_one(ctx: Any) -> dict[str, Any]:
    """The run waits for a sale whose payload field `ctx.event.payload["field"]` is 1."""
    path = [ctx.event.payload["field"]]
    return {"version": 1, "expr": {"kind": "atom", "path": path, "op": {"kind": "eq", "value": 1}}}


def _watchers(registry: WorkflowRegistry) -> None:
    registry.register(
        define_workflow(
            name="watch",
            trigger=on_event("watch.started"),
            idempotency_key=lambda e: e.payload["k"],
            awaits={"sale": "sale.started"},
            register=False,
            steps=lambda s: [
                s.wait_for_event("sale.started", match=_field_is_one, timeout="P7D"),
            ],
        )
    )


def _watch(store: Store, registry: WorkflowRegistry, key: str, field: str, tenant: str) -> str:
    trigger(store, registry, "watch.started", {"k": key, "field": field}, T0, tenant)
    return run_id_for("watch", key)


def _sale(event_id: str, tenant: str = TENANT_A, **payload: int) -> DomainEvent:
    return DomainEvent(event_id, "sale.started", payload, tenant, SALE, "shop")


def _matches(store: Store, tenant: str) -> dict[str, list[str]]:
    """Per run of the tenant, the event ids recorded on its stream as matched."""
    rows = store.conn.execute(
        "SELECT stream_id::text AS run, payload->>'eventId' AS event FROM wf_events "
        "WHERE tenant_id = %s AND type = %s ORDER BY stream_id, version",
        (tenant, ev.STEP_EVENT_MATCHED),
    ).fetchall()
    found: dict[str, list[str]] = {}
    for r in rows:
        found.setdefault(r["run"], []).append(r["event"])
    return found


def _by_label(store: Store, tenant: str) -> dict[str, list[str]]:
    """`_matches` with the runs of `_watch(..., f"{tenant}-{x}", ...)` named x."""
    label = {run_id_for("watch", f"{tenant}-{x}"): x for x in ("a", "b")}
    return {label[run]: ids for run, ids in _matches(store, tenant).items()}


class CountingQueue(InMemoryResumeQueue):
    """Counts the sends (one per lease transaction) besides what they carried."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.sends = 0

    def send(self, requests: Any) -> list[ResumeRequest]:
        self.sends += 1
        return super().send(requests)


@pytest.fixture
def watching(registry: WorkflowRegistry) -> WorkflowRegistry:
    _watchers(registry)
    return registry


def test_a_batch_of_events_wakes_each_its_own_run_with_one_send(
    store: Store, watching: WorkflowRegistry, clock: ManualClock
) -> None:
    runs = {f: _watch(store, watching, f"k-{f}", f, TENANT_A) for f in ("a", "b", "c")}
    queue = CountingQueue(clock)
    clock.set(SALE)

    batch = ops.wake_and_enqueue_many(
        store, queue, [_sale(f"sale-{f}", **{f: 1}) for f in ("a", "b", "c")], SALE
    )

    assert [[w.run_id for w in m.woken] for m in batch.events] == [
        [runs["a"]],
        [runs["b"]],
        [runs["c"]],
    ]
    assert all(batch.complete(i) for i in range(3))
    assert _matches(store, TENANT_A) == {runs[f]: [f"sale-{f}"] for f in ("a", "b", "c")}
    assert (batch.enqueued, queue.sends) == (3, 1)  # one lease and one send for the batch
    assert sorted(r.run_id for r in queue.sent) == sorted(runs.values())


def test_a_batch_reads_every_events_waits_in_one_round_trip_with_the_lock(
    db_url: str, store: Store, watching: WorkflowRegistry, clock: ManualClock
) -> None:
    """Ten events of one (tenant, type): the lock and the ten reads of their waits go to
    the server together (one round trip, the lock first), not one after the other."""
    fields = [chr(ord("a") + i) for i in range(10)]
    for f in fields:
        _watch(store, watching, f"k-{f}", f, TENANT_A)
    clock.set(SALE)
    conn = CountingConnection.connect(db_url, autocommit=True, row_factory=dict_row)
    counted = Store(conn)
    try:
        with counted.transaction():
            conn.round_trips = 0
            found = counted.pending.locked_waiting_for(
                TENANT_A, "sale.started", [(SALE, None, f"sale-{f}") for f in fields]
            )
            trips = conn.round_trips
    finally:
        counted.close()
    assert trips == 1
    assert [len(rows) for rows in found] == [10] * 10  # no keys: every wait may take each


class StatementLog(CountingConnection):
    """Keeps the text of every statement executed, in a pipeline or not."""

    statements: list[str]

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        self.statements.append(str(query))
        return super().execute(query, *args, **kwargs)


def _wake_ten_logged(
    db_url: str, store: Store, watching: WorkflowRegistry, clock: ManualClock
) -> tuple[dict[str, str], ops.WakeupBatch, StatementLog]:
    """Ten runs of tenant A, each waiting for a sale with its own field a..j set, woken in
    one batch by ten such sales on a connection that logs its statements: the runs by
    field, the batch, the log."""
    fields = [chr(ord("a") + i) for i in range(10)]
    runs = {f: _watch(store, watching, f"k-{f}", f, TENANT_A) for f in fields}
    clock.set(SALE)
    conn = StatementLog.connect(db_url, autocommit=True, row_factory=dict_row)
    conn.statements = []
    counted = Store(conn)
    try:
        batch = ops.wake_and_enqueue_many(
            counted,
            InMemoryResumeQueue(clock),
            [_sale(f"sale-{f}", **{f: 1}) for f in fields],
            SALE,
        )
    finally:
        counted.close()
    return runs, batch, conn


def test_a_batch_of_events_stored_now_reads_back_no_states(
    db_url: str, store: Store, watching: WorkflowRegistry, clock: ManualClock
) -> None:
    """Ten new events: the insert that stored them says they are open, and their
    instants are what it wrote, so no statement reads their states back (one statement
    of ten rows did, 13-20 us a run of the server's time in the event-wait burst)."""
    _, batch, conn = _wake_ten_logged(db_url, store, watching, clock)
    assert [len(m.woken) for m in batch.events] == [1] * 10
    assert sum("AS done" in q for q in conn.statements) == 0


def test_a_batch_reads_back_in_one_statement_the_states_of_the_events_it_did_not_store(
    store: Store, watching: WorkflowRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A redelivered event (finished before) and one stored before but not matched yet,
    between two new ones: one read, of those two only; the finished one matches nothing
    more, the unmatched one wakes its run."""
    runs = {f: _watch(store, watching, f"k-{f}", f, TENANT_A) for f in "abcd"}
    clock.set(SALE)
    queue = InMemoryResumeQueue(clock)
    ops.wake_and_enqueue_many(store, queue, [_sale("sa", a=1)], SALE)
    with store.transaction(), store.pipeline():  # stored, its wakeup died before matching
        store_inbox_events(store, [_sale("sb", b=1)], SALE)
    asked: list[list[tuple[str, str]]] = []
    states = store.inbox.wakeup_states

    def reading(events: Any) -> list[tuple[datetime, bool]]:
        asked.append(list(events))
        return states(events)

    monkeypatch.setattr(store.inbox, "wakeup_states", reading)
    batch = ops.wake_and_enqueue_many(
        store,
        queue,
        [_sale("sc", c=1), _sale("sa", a=1), _sale("sb", b=1), _sale("sd", d=1)],
        SALE,
    )

    assert asked == [[(TENANT_A, "sa"), (TENANT_A, "sb")]]
    assert [[w.run_id for w in m.woken] for m in batch.events] == [
        [runs["c"]],
        [],
        [runs["b"]],
        [runs["d"]],
    ]
    assert _matches(store, TENANT_A) == {runs[f]: [f"s{f}"] for f in "abcd"}


def test_the_instants_of_events_stored_now_are_those_the_inbox_reads_back(
    store: Store,
) -> None:
    """An event's instant decides which waits may take it (their look-back's start):
    for events the insert stored, the wakeup takes it from the event (its EventBridge
    time, else the receive time) instead of reading it; it must be what the inbox
    holds, to the microsecond and whatever the zone. A time without a zone is read back
    (the server's zone would decide it), and so is one whose zone gives no offset, which
    Python counts as naive too."""
    received = SALE + timedelta(seconds=3, microseconds=250)
    events = [
        DomainEvent("at-utc", "sale.started", {"a": 1}, TENANT_A, SALE, "shop"),
        DomainEvent("no-time", "sale.started", {"a": 1}, TENANT_A, None, "shop"),
        DomainEvent(
            "elsewhere",
            "sale.started",
            {"a": 1},
            TENANT_A,
            datetime(2026, 1, 5, 10, 4, 59, 999_999, tzinfo=timezone(timedelta(hours=1))),
            "shop",
        ),
        DomainEvent("no-zone", "sale.started", {"a": 1}, TENANT_A, datetime(2026, 1, 5, 9), "shop"),
        DomainEvent(
            "zone-without-offset",
            "sale.started",
            {"a": 1},
            TENANT_A,
            datetime(2026, 1, 5, 9, tzinfo=_NoOffset()),
            "shop",
        ),
    ]

    opened = open_events(store, events, received)

    read = store.inbox.wakeup_states([(TENANT_A, e.id) for e in events])
    assert [(e.id, instant) for e, instant in opened] == [
        (e.id, instant) for e, (instant, _) in zip(events, read, strict=True)
    ]
    assert opened[1][1] == received


def test_wakeup_states_come_in_the_order_asked_and_an_unstored_event_is_named(
    store: Store, watching: WorkflowRegistry, clock: ManualClock
) -> None:
    run = _watch(store, watching, "k-a", "a", TENANT_A)
    clock.set(SALE)
    ops.wake_and_enqueue_many(store, InMemoryResumeQueue(clock), [_sale("done", a=1)], SALE)
    late = SALE + timedelta(minutes=1)
    with store.transaction(), store.pipeline():  # stored, not matched
        store_inbox_events(store, [_sale("open", TENANT_B, a=1)], late)

    states = store.inbox.wakeup_states([(TENANT_B, "open"), (TENANT_A, "done")])

    assert states == [(SALE, False), (SALE, True)]  # EventBridge time, not receive time
    assert _matches(store, TENANT_A) == {run: ["done"]}
    with pytest.raises(StoreError, match=f"event missing of tenant {TENANT_A} is not in the inbox"):
        store.inbox.wakeup_states([(TENANT_A, "done"), (TENANT_A, "missing")])


@pytest.mark.parametrize("order", ["narrow-first", "wide-first"])
def test_two_events_of_a_batch_matching_one_wait_give_it_to_the_first_as_separate_calls_would(
    store: Store, watching: WorkflowRegistry, clock: ManualClock, order: str
) -> None:
    """Run `a` waits for a=1, run `b` for b=1. Event `narrow` offers a=1 only, `wide`
    offers both: both match run `a`, whose wait goes to the first of the batch; the
    second goes on to run `b` (wide) or matches nothing and is finished (narrow). The
    same events in the same order as two separate calls (tenant B) end the same way."""
    events = {"narrow": {"a": 1}, "wide": {"a": 1, "b": 1}}
    names = ["narrow", "wide"] if order == "narrow-first" else ["wide", "narrow"]
    for tenant in (TENANT_A, TENANT_B):
        _watch(store, watching, f"{tenant}-a", "a", tenant)
        _watch(store, watching, f"{tenant}-b", "b", tenant)
    queue = InMemoryResumeQueue(clock)
    clock.set(SALE)

    batch = ops.wake_and_enqueue_many(
        store, queue, [_sale(n, TENANT_A, **events[n]) for n in names], SALE
    )
    for n in names:
        ops.wake_and_enqueue(store, queue, _sale(n, TENANT_B, **events[n]), SALE)

    expected = (
        {"a": ["narrow"], "b": ["wide"]}
        if order == "narrow-first"
        else {"a": ["wide"], "b": ["wide"]}
    )
    assert _by_label(store, TENANT_A) == expected
    assert _by_label(store, TENANT_B) == expected  # the separate calls
    woken = {m.event.id: sorted(w.run_id for w in m.woken) for m in batch.events}
    assert woken == {
        n: sorted(run_id_for("watch", f"{TENANT_A}-{x}") for x, ids in expected.items() if n in ids)
        for n in names
    }
    # Every event of the batch is finished: a redelivery matches nothing more.
    done = store.conn.execute(
        "SELECT count(*) AS n FROM inbox WHERE tenant_id = %s AND woken_at IS NOT NULL",
        (TENANT_A,),
    ).fetchone()
    assert done is not None and done["n"] == 2


def test_a_batch_with_two_tenants_wakes_each_tenants_runs_only(
    store: Store, watching: WorkflowRegistry, clock: ManualClock
) -> None:
    """The same event id and payload in two tenants: each wakes its tenant's run, and a
    tenant with no matching wait gets nothing from another tenant's."""
    run_a = _watch(store, watching, "ka", "a", TENANT_A)
    run_b = _watch(store, watching, "kb", "a", TENANT_B)
    _watch(store, watching, "only-a", "b", TENANT_A)  # waits for b=1: only tenant A has it
    queue = InMemoryResumeQueue(clock)
    clock.set(SALE)

    batch = ops.wake_and_enqueue_many(
        store,
        queue,
        [_sale("same", TENANT_A, a=1), _sale("same", TENANT_B, a=1), _sale("bee", TENANT_B, b=1)],
        SALE,
    )

    assert [(m.event.tenant_id, [w.run_id for w in m.woken]) for m in batch.events] == [
        (TENANT_A, [run_a]),
        (TENANT_B, [run_b]),
        (TENANT_B, []),
    ]
    assert _matches(store, TENANT_A) == {run_a: ["same"]}
    assert _matches(store, TENANT_B) == {run_b: ["same"]}
    assert sorted((r.tenant_id, r.run_id) for r in queue.sent) == sorted(
        [(TENANT_A, run_a), (TENANT_B, run_b)]
    )


def test_a_redelivered_batch_wakes_and_sends_nothing_twice(
    store: Store, watching: WorkflowRegistry, clock: ManualClock
) -> None:
    runs = [_watch(store, watching, f"k{f}", f, TENANT_A) for f in ("a", "b")]
    events = [_sale("sa", a=1), _sale("sb", b=1), _sale("sa", a=1)]  # a duplicate inside too
    queue = InMemoryResumeQueue(clock)
    clock.set(SALE)

    first = ops.wake_and_enqueue_many(store, queue, events, SALE)
    again = ops.wake_and_enqueue_many(store, queue, events, SALE)

    assert [len(m.woken) for m in first.events] == [1, 1, 0]
    assert [len(m.woken) for m in again.events] == [0, 0, 0]
    assert all(again.complete(i) for i in range(3)) and again.enqueued == 0
    assert _matches(store, TENANT_A) == {runs[0]: ["sa"], runs[1]: ["sb"]}
    assert Counter(r.run_id for r in queue.sent) == Counter(runs)


def test_a_batch_that_died_after_its_matches_committed_is_enqueued_by_its_retry(
    store: Store, watching: WorkflowRegistry, clock: ManualClock
) -> None:
    runs = [_watch(store, watching, f"k{f}", f, TENANT_A) for f in ("a", "b")]
    events = [_sale("sa", a=1), _sale("sb", b=1)]
    clock.set(SALE)

    class Down(InMemoryResumeQueue):
        def send(self, requests: Any) -> list[ResumeRequest]:
            raise ConnectionError("the queue is down")

    with pytest.raises(ConnectionError):
        ops.wake_and_enqueue_many(store, Down(clock), events, SALE)
    assert _matches(store, TENANT_A) == {runs[0]: ["sa"], runs[1]: ["sb"]}  # committed

    queue = InMemoryResumeQueue(clock)
    retry = ops.wake_and_enqueue_many(store, queue, events, SALE)

    assert [len(m.woken) for m in retry.events] == [0, 0]  # nothing matched twice
    assert retry.enqueued == 2 and sorted(r.run_id for r in queue.sent) == sorted(runs)


def test_a_resume_batch_reads_its_runs_awaited_events_with_their_streams(
    db_url: str, store: Store, watching: WorkflowRegistry, clock: ManualClock
) -> None:
    """Ten runs woken by ten events and resumed in one batch: the events they take come
    with the runs' tails (load_run_tail), so their passes read nothing more and run
    before their claims, which go out with the passes' writes: two round trips for the
    batch (the runs' read, the writes). One read a pass made ten more round trips,
    each waiting on a server busy with the rest of the burst; one read of the batch's
    events sent with a statement of claims made two more."""
    fields = [chr(ord("a") + i) for i in range(10)]
    runs = {f: _watch(store, watching, f"k-{f}", f, TENANT_A) for f in fields}
    clock.set(SALE)
    queue = InMemoryResumeQueue(clock)
    ops.wake_and_enqueue_many(store, queue, [_sale(f"sale-{f}", **{f: 1}) for f in fields], SALE)
    items = [ops.ResumeRequestItem(r.tenant_id, r.run_id, r.step_index) for r in queue.sent]
    conn = StatementLog.connect(db_url, autocommit=True, row_factory=dict_row)
    conn.statements = []
    counted = Store(conn)
    # A worker's connection registers its definitions once, on its first pass: that
    # happened before (ResumeRun's warm connection), so it is not counted here.
    with counted.transaction():
        pinning.ensure_registered(counted, watching.latest("watch"), SALE)
    conn.round_trips, conn.statements = 0, []
    try:
        results = ops.resume_runs(counted, items, SALE, watching)
    finally:
        counted.close()
    assert [getattr(r, "outcome", r) for r in results] == ["completed"] * 10
    sent = set(conn.statements)
    # The only statement that reads the inbox is the runs' read.
    assert [q for q in sent if "inbox" in q] == [query("load_run_tail")]
    assert query("append_to_many") not in sent  # the claims went with the passes
    assert conn.round_trips == 2
    for f, run_id in runs.items():  # each took its own event's payload
        assert store.results.of_run(TENANT_A, run_id).values["sale.started"] == {f: 1}


def test_a_batch_marks_its_matched_rows_and_finished_events_in_one_statement_each(
    db_url: str, store: Store, watching: WorkflowRegistry, clock: ManualClock
) -> None:
    """Ten events matching a run each: one update marks the ten pending rows, each with
    its own event, and one marks the ten events woken (one statement an event each made
    twenty statements a batch, and the rows' update was planned anew every time)."""
    runs, _, conn = _wake_ten_logged(db_url, store, watching, clock)
    assert (
        sum("UPDATE workflow_run_pending p\nSET trigger_event_type" in q for q in conn.statements)
        == 1
    )
    assert sum("SET woken_at" in q for q in conn.statements) == 1
    marked = store.conn.execute(
        "SELECT run_id::text AS run, awaited_event_id FROM workflow_run_pending"
        " WHERE tenant_id = %s",
        [TENANT_A],
    ).fetchall()
    assert {r["run"]: r["awaited_event_id"] for r in marked} == {
        run_id: f"sale-{f}" for f, run_id in runs.items()
    }
    woken = store.conn.execute(
        "SELECT count(*) AS n FROM inbox WHERE tenant_id = %s AND woken_at IS NOT NULL",
        [TENANT_A],
    ).fetchone()
    assert woken is not None and woken["n"] == 10


def test_an_event_wait_batch_whose_claim_lost_runs_again_claiming_first(
    db_url: str,
    store: Store,
    watching: WorkflowRegistry,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Woken runs' passes run before their claims (the awaited events came with the
    read): when another worker resumed one of them after the read, the passes' statement
    meets its claim taken, and the batch runs again claiming first, where that run
    answers already-resumed. Each run is resumed exactly once."""
    caplog.set_level(logging.DEBUG, logger="workflow_runner")
    runs = {f: _watch(store, watching, f"race-{f}", f, TENANT_A) for f in "abc"}
    clock.set(SALE)
    queue = InMemoryResumeQueue(clock)
    ops.wake_and_enqueue_many(store, queue, [_sale(f"race-{f}", **{f: 1}) for f in runs], SALE)
    items = [ops.ResumeRequestItem(r.tenant_id, r.run_id, r.step_index) for r in queue.sent]
    other = connect(db_url)
    try:
        done = _resume_concurrently_after_the_read(monkeypatch, other, watching, runs["b"], SALE)
        results = ops.resume_runs(store, items, SALE, watching)
    finally:
        other.close()

    assert [d.outcome for d in done] == ["completed"]
    outcomes = {r.run_id: getattr(r, "outcome", r) for r in results}
    assert outcomes == {
        runs["a"]: "completed",
        runs["b"]: "already-resumed",
        runs["c"]: "completed",
    }
    _assert_ran_again_claiming_first(caplog)
    for f, run_id in runs.items():
        events = stream(store, run_id)
        assert [e.type for e in events].count(ev.STEP_RESUMED) == 1
        assert [e.version for e in events] == list(range(1, len(events) + 1))
        assert store.results.of_run(TENANT_A, run_id).values["sale.started"] == {f: 1}
