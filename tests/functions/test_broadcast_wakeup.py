"""EventWakeup with one event matching thousands of waits, and EventWakeup invoked again
after its first attempt committed but never enqueued (issue 11, items 5 and 6).

The cost per woken run is a small constant (set-based match, lease and enqueue: the
statements do not grow with the runs), the work is chunked so it fits the function's
timeout, each wait is woken exactly once, and a retried invocation enqueues what the
database says is matched and not in flight."""

from __future__ import annotations

import inspect
import json
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from workflow_runner import DomainEvent, ManualClock, define_workflow, on_event
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.aws.inprocess import FakeLambdaContext, build_inprocess_runtime
from workflow_runner.aws.template import Handler
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.embedded import database_url
from workflow_runner.errors import TransientStoreError
from workflow_runner.ports import ResumeRequest, Runtime, set_runtime
from workflow_runner.settings import Settings
from workflow_runner.store import Sql, Store, connect

from tests.support import TENANT_A, eventbridge

RUNS = 2000
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SALE = T0 + timedelta(hours=1)
Handlers = dict[str, Handler]


class CountingSql(Sql):
    """Counts the statements a Store runs."""

    statements = 0

    def all(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        CountingSql.statements += 1
        return super().all(name, params)

    def one(self, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        CountingSql.statements += 1
        return super().one(name, params)

    def run(self, name: str, params: dict[str, Any]) -> int:
        CountingSql.statements += 1
        return super().run(name, params)


def _watchers(registry: WorkflowRegistry) -> None:
    registry.register(
        define_workflow(
            name="sale-watch",
            trigger=on_event("watch.started"),
            idempotency_key=lambda e: e.payload["k"],
            awaits={"sale": "sale.started"},
            register=False,
            steps=lambda s: [
                s.wait_for_event(
                    "sale.started",
                    match={
                        "version": 1,
                        "expr": {
                            "kind": "atom",
                            "path": ["region"],
                            "op": {"kind": "eq", "value": "eu"},
                        },
                    },
                    timeout="P7D",
                ),
                s.return_(lambda ctx: {"sale": ctx.steps["sale.started"]["name"]}),
            ],
        )
    )


@pytest.fixture(scope="module")
def watching_database(pg_server_url: str, template_database: str) -> Iterator[str]:
    """A database with RUNS runs all waiting for the same sale, built once per module."""
    name = f"wfr_watching_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_database}"')
    url = database_url(pg_server_url, name)
    registry = WorkflowRegistry()
    _watchers(registry)
    store = connect(url)
    try:
        for i in range(RUNS):
            e = DomainEvent(f"w{i}", "watch.started", {"k": f"k{i}"}, TENANT_A, T0, "shop")
            ops.ingest_domain_event(store, e, T0, registry)
        ops.project_pending(store, T0)
    finally:
        store.close()
    try:
        yield name
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db_url(pg_server_url: str, watching_database: str) -> Iterator[str]:
    """This module's databases start with the waiting runs (a copy for each test)."""
    name = f"wfr_t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{watching_database}" STRATEGY FILE_COPY')
    try:
        yield database_url(pg_server_url, name)
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def watching(registry: WorkflowRegistry) -> WorkflowRegistry:
    _watchers(registry)
    return registry


def _sale(event_id: str = "sale-1") -> dict[str, Any]:
    return eventbridge(
        "sale.started",
        {"tenantId": TENANT_A, "region": "eu", "name": "winter"},
        event_id=event_id,
        when=SALE,
    )


@contextmanager
def _runtime(
    db_url: str, clock: ManualClock, registry: WorkflowRegistry, **kw: Any
) -> Iterator[Runtime]:
    store = connect(db_url, **kw)
    rt = build_inprocess_runtime(
        store,
        clock,
        settings=Settings(database_url=db_url, mail_sender="noreply@example.com"),
        registry=registry,
    )
    set_runtime(rt)
    try:
        yield rt
    finally:
        set_runtime(None)
        store.close()


def _matched_per_run(store: Store, event_id: str) -> Counter[str]:
    rows = store.conn.execute(
        "SELECT stream_id::text AS run FROM wf_events WHERE type = %s AND payload->>'eventId' = %s",
        (ev.STEP_EVENT_MATCHED, event_id),
    ).fetchall()
    return Counter(r["run"] for r in rows)


def test_one_event_wakes_thousands_of_waits_with_a_constant_number_of_statements(
    handlers: Handlers, store: Store, watching: WorkflowRegistry, clock: ManualClock, db_url: str
) -> None:
    clock.set(SALE)
    with _runtime(db_url, clock, watching, sql_type=CountingSql) as rt:
        CountingSql.statements = 0
        result = handlers["EventWakeupFunction"](_sale(), FakeLambdaContext())
        statements = CountingSql.statements
        sent: list[ResumeRequest] = rt.resume_queue.sent  # type: ignore[attr-defined]
    assert (result["wokenCount"], result["enqueued"]) == (RUNS, RUNS)
    matched = _matched_per_run(store, "sale-1")
    assert len(matched) == RUNS and set(matched.values()) == {1}  # each woken exactly once
    assert Counter(r.run_id for r in sent) == Counter(matched)  # each enqueued once
    assert all(r.delay_seconds == 0 for r in sent)
    assert statements < RUNS / 20, f"{statements} statements for {RUNS} woken runs"


def test_a_wakeup_out_of_time_stops_between_chunks_and_its_retry_finishes(
    store: Store, watching: WorkflowRegistry, clock: ManualClock
) -> None:
    from workflow_runner.aws.inprocess import InMemoryResumeQueue

    queue = InMemoryResumeQueue(clock)
    sale = DomainEvent("sale-2", "sale.started", {"region": "eu", "name": "x"}, TENANT_A, SALE, "s")
    ticks = iter([0.0, 0.0, 100.0])

    first = ops.wake_and_enqueue(
        store, queue, sale, SALE, budget_seconds=10, chunk=500, monotonic=lambda: next(ticks, 100.0)
    )
    assert (first.complete, first.matched) == (False, 1000)  # two chunks, then out of time
    assert first.enqueued == 500  # one chunk of leases still went out

    second = ops.wake_and_enqueue(store, queue, sale, SALE)
    assert second.complete and first.matched + second.matched == RUNS
    assert first.enqueued + second.enqueued == RUNS  # the retry sends the rest, from the db
    matched = _matched_per_run(store, "sale-2")
    assert len(matched) == RUNS and set(matched.values()) == {1}
    assert Counter(r.run_id for r in queue.sent) == Counter(matched)
    assert ops.wake_and_enqueue(store, queue, sale, SALE).matched == 0  # a redelivery


class _CrashingQueue:
    """SQS fails for the whole first send (a crash after the commit); then works."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.failures = 1

    def send(self, requests: Any) -> Any:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("the function died after the commit")
        return self.inner.send(requests)


def test_a_retried_wakeup_enqueues_what_its_first_attempt_committed(
    handlers: Handlers, store: Store, watching: WorkflowRegistry, clock: ManualClock, db_url: str
) -> None:
    clock.set(SALE)
    with _runtime(db_url, clock, watching) as rt:
        queue = rt.resume_queue
        rt.resume_queue = _CrashingQueue(queue)
        with pytest.raises(ConnectionError):
            handlers["EventWakeupFunction"](_sale("sale-3"), FakeLambdaContext())
        assert queue.sent == []  # type: ignore[attr-defined]
        assert len(_matched_per_run(store, "sale-3")) == RUNS  # but the matches committed
        # EventBridge retries the invocation.
        retry = handlers["EventWakeupFunction"](_sale("sale-3"), FakeLambdaContext())
        sent = queue.sent  # type: ignore[attr-defined]
    assert retry["enqueued"] == RUNS
    assert Counter(r.run_id for r in sent) == Counter(_matched_per_run(store, "sale-3"))


class _AckLosingStore(Store):
    """Commits the first transaction that records matches, then reports the connection
    lost, as when the acknowledgement of a commit never arrives."""

    lost = 0

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with super().transaction():
            yield
        if _AckLosingStore.lost == 0 and self.conn.execute(
            "SELECT count(*) AS n FROM wf_events WHERE type = %s", (ev.STEP_EVENT_MATCHED,)
        ).fetchone() != {"n": 0}:
            _AckLosingStore.lost += 1
            self.close()
            raise TransientStoreError("connection lost after COMMIT")


def test_a_commit_whose_acknowledgement_was_lost_still_enqueues_every_woken_run(
    handlers: Handlers, store: Store, watching: WorkflowRegistry, clock: ManualClock, db_url: str
) -> None:
    clock.set(SALE)
    _AckLosingStore.lost = 0
    flaky = connect(db_url)
    flaky.__class__ = _AckLosingStore
    rt = build_inprocess_runtime(
        lambda: flaky if not flaky.closed else connect(db_url),
        clock,
        settings=Settings(database_url=db_url, mail_sender="noreply@example.com"),
        registry=watching,
    )
    rt.reconnect = lambda: None
    set_runtime(rt)
    try:
        result = handlers["EventWakeupFunction"](_sale("sale-4"), FakeLambdaContext())
    finally:
        set_runtime(None)
    assert _AckLosingStore.lost == 1  # the operation ran again on a fresh connection
    assert result["enqueued"] == RUNS
    sent = rt.resume_queue.sent  # type: ignore[attr-defined]
    assert Counter(r.run_id for r in sent) == Counter(_matched_per_run(store, "sale-4"))


def test_a_retry_never_matches_an_event_again_for_a_run_that_already_consumed_it(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    """A run woken by the first attempt may already wait again for the same type when the
    retry comes: the event is consumed for it."""
    from workflow_runner.aws.inprocess import InMemoryResumeQueue

    registry.register(
        define_workflow(
            name="two-sales",
            trigger=on_event("watch.started"),
            idempotency_key="one",
            awaits={"flash": "flash.started"},
            register=False,
            steps=lambda s: [
                s.wait_for_event("flash.started", timeout="P7D", result_key="first"),
                s.wait_for_event("flash.started", timeout="P7D", lookback="PT0S"),
                s.return_({"isSuccess": True}),
            ],
        )
    )
    ops.ingest_domain_event(
        store, DomainEvent("w", "watch.started", {}, TENANT_A, T0, "shop"), T0, registry
    )
    ops.project_pending(store, T0)
    sale = DomainEvent("sale-5", "flash.started", {"region": "eu"}, TENANT_A, SALE, "shop")
    queue = InMemoryResumeQueue(clock)
    ops.wake_and_enqueue(store, queue, sale, SALE)
    (request,) = queue.receive()
    ops.resume_run(store, TENANT_A, request.run_id, 0, SALE, registry=registry)
    ops.project_pending(store, SALE)  # now waiting at step 1 for the same type
    store.conn.execute("UPDATE inbox SET woken_at = NULL WHERE event_id = 'sale-5'")  # a retry
    assert ops.wake_and_enqueue(store, queue, sale, SALE).matched == 0
    assert len(_matched_per_run(store, "sale-5")) == 1


def test_an_intake_record_out_of_time_is_left_for_its_redelivery_which_finishes_it(
    handlers: Handlers,
    store: Store,
    watching: WorkflowRegistry,
    clock: ManualClock,
    db_url: str,
    emitted: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Behind the SQS intake queue, a broadcast the invocation's time cannot finish fails
    its record (not the batch, and not as a fault: no traceback, no IntakeRecordFailed);
    SQS delivers it again and that delivery matches and enqueues the rest."""
    handler = handlers["EventWakeupFunction"]
    app = inspect.unwrap(handler).__globals__  # functions/event_wakeup/app.py
    real = app["wake_and_enqueue_many"]
    ticks = iter([0.0, 0.0, 100.0])  # two chunks of 500, then the time is up
    attempts: list[int] = []

    def short_of_time(*args: Any, **kwargs: Any) -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            kwargs.update(chunk=500, monotonic=lambda: next(ticks, 100.0))
        return real(*args, **kwargs)

    monkeypatch.setitem(app, "wake_and_enqueue_many", short_of_time)
    batch = {
        "Records": [
            {"messageId": "m-sale", "body": json.dumps(_sale("sale-6"))},
            {"messageId": "m-other", "body": json.dumps(_sale("sale-7") | {"detail": {}})},
        ]
    }
    clock.set(SALE)
    with _runtime(db_url, clock, watching) as rt:
        emitted()
        first = handler(batch, FakeLambdaContext())
        out = emitted()
        assert "m-sale" in [f["itemIdentifier"] for f in first["batchItemFailures"]]
        assert out.metric("WakeupsLeft") == 1 and out.metric("IntakeRecordFailed") == 0
        assert not [line for line in out.logs if "exception" in line]
        assert len(_matched_per_run(store, "sale-6")) == 1000

        redelivered = handler({"Records": batch["Records"][:1]}, FakeLambdaContext())
        sent = rt.resume_queue.sent  # type: ignore[attr-defined]
    assert redelivered["batchItemFailures"] == []
    matched = _matched_per_run(store, "sale-6")
    assert len(matched) == RUNS and set(matched.values()) == {1}
    assert Counter(r.run_id for r in sent) == Counter(matched)  # each enqueued once
