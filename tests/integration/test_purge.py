"""The purge of settled runs past their retention, on a real PostgreSQL: what it deletes,
what it keeps, and that it is safe next to the stages that still touch runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from workflow_runner import engine as ops
from workflow_runner import run_id_for
from workflow_runner.aws.inprocess import CapturedMailer, InMemoryResumeQueue
from workflow_runner.clock import ManualClock
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine.dispatcher import dispatch_pending
from workflow_runner.engine.purge import purge_settled_runs
from workflow_runner.engine.redrive import redrive_run
from workflow_runner.engine.resume import ResumeRequestItem
from workflow_runner.engine.tasks import TaskPorts
from workflow_runner.engine.worker import work
from workflow_runner.errors import InvalidInput, RunNotFound
from workflow_runner.store import Store, connect
from workflow_runner.webhook_guard import WebhookGuard

from tests.support import (
    TENANT_A,
    TENANT_B,
    event,
    register,
    resume_due,
    stream_types,
    trigger,
)

# Every table a run leaves rows in, and how to count one run's rows there.
RUN_TABLES = {
    "wf_events (run)": "SELECT count(*) FROM wf_events WHERE stream_id = %(run)s::uuid",
    "workflow_runs": "SELECT count(*) FROM workflow_runs WHERE run_id = %(run)s::uuid",
    "run_results": "SELECT count(*) FROM run_results WHERE run_id = %(run)s::uuid",
    "run_consumed_events": "SELECT count(*) FROM run_consumed_events WHERE run_id = %(run)s::uuid",
    "task_queue": "SELECT count(*) FROM task_queue WHERE run_id = %(run)s::uuid",
    "callbacks": "SELECT count(*) FROM callbacks WHERE run_id = %(run)s::uuid",
    "workflow_run_pending": (
        "SELECT count(*) FROM workflow_run_pending WHERE run_id = %(run)s::uuid"
    ),
    "dispatch_outbox": "SELECT count(*) FROM dispatch_outbox WHERE run_id = %(run)s::uuid",
    "wf_events (dispatch)": """SELECT count(*) FROM wf_events e JOIN dispatch_outbox o
        ON o.request_id = e.stream_id WHERE o.run_id = %(run)s::uuid""",
    "run_joins": "SELECT count(*) FROM run_joins WHERE parent_run_id = %(run)s::uuid",
}

T0_EVENT = {"tenantId": TENANT_A}


_Mailer = CapturedMailer


class _NoHttp:
    def send(self, *args: object) -> object:
        raise AssertionError("no webhook expected")


def _workflows(registry: WorkflowRegistry) -> None:
    register(
        registry,
        name="mailer",
        trigger=on("order.placed"),
        idempotency_key=lambda e: e.payload["id"],
        awaits={"paid": "order.paid"},
        steps=lambda s: [
            s.mail_send(to="ops@example.com", subject="new", body="an order"),
            s.compute("n", lambda ctx: 1),
            s.task("t", lambda ctx: {"ok": True}),
            s.wait_for_event(
                "order.paid",
                match=lambda ctx: {
                    "version": 1,
                    "expr": {
                        "kind": "atom",
                        "path": ["id"],
                        "op": {"kind": "eq", "value": ctx.event.payload["id"]},
                    },
                },
                timeout="P3D",
            ),
            s.return_(lambda ctx: {"done": True}),
        ],
    )
    register(
        registry,
        name="failing",
        trigger=on("job.started"),
        idempotency_key=lambda e: e.payload["id"],
        steps=lambda s: [s.compute("x", lambda ctx: 1 / 0)],
    )
    register(
        registry,
        name="sleeper",
        trigger=on("nap.started"),
        idempotency_key=lambda e: e.payload["id"],
        steps=lambda s: [s.wait(for_="P1D"), s.return_(lambda ctx: {"slept": True})],
    )
    register(
        registry,
        name="short-lived",
        trigger=on("blip"),
        idempotency_key=lambda e: e.payload["id"],
        retention="P2D",
        steps=lambda s: [s.return_(lambda ctx: {"ok": True})],
    )
    register(
        registry,
        name="kept",
        trigger=on("audit"),
        idempotency_key=lambda e: e.payload["id"],
        retention="forever",
        steps=lambda s: [s.return_(lambda ctx: {"ok": True})],
    )


def on(event_type: str) -> Any:
    from workflow_runner import on_event

    return on_event(event_type)


def _counts(store: Store, run_id: str) -> dict[str, int]:
    return {
        table: store.conn.execute(sql, {"run": run_id}).fetchone()["count"]  # type: ignore[index]
        for table, sql in RUN_TABLES.items()
    }


def _status(store: Store, run_id: str, tenant: str = TENANT_A) -> str | None:
    summary = store.runs.get(tenant, run_id)
    return None if summary is None else summary.status


def _work(store: Store, registry: WorkflowRegistry, now: datetime, mailer: _Mailer) -> None:
    """Run tasks, deliver mail, resume what is due: the functions between two scans."""
    queue = InMemoryResumeQueue(ManualClock(now))
    ports = TaskPorts(registry, mailer, _NoHttp(), WebhookGuard(), mail_sender="x@example.com")
    for _ in range(5):
        ops.project_pending(store, now)
        work(store, ports, queue, lambda: now, lambda: 300.0)
        items = [
            ResumeRequestItem(m.tenant_id, m.run_id, m.step_index) for m in queue.receive(limit=100)
        ]
        if items:
            ops.resume_runs(store, items, now, registry)
        for tenant in (TENANT_A, TENANT_B):
            resume_due(store, registry, now, tenant)


@pytest.fixture
def setup(store: Store, clock: ManualClock) -> tuple[WorkflowRegistry, _Mailer]:
    registry = WorkflowRegistry()
    _workflows(registry)
    return registry, _Mailer()


def _complete_mailer(
    store: Store, registry: WorkflowRegistry, mailer: _Mailer, now: datetime, key: str
) -> str:
    trigger(store, registry, "order.placed", {**T0_EVENT, "id": key}, now)
    _work(store, registry, now, mailer)
    ops.wake_on_event(store, event("order.paid", {**T0_EVENT, "id": key}), now)
    _work(store, registry, now, mailer)
    run_id = run_id_for("mailer", key)
    assert _status(store, run_id) == "completed", stream_types(store, run_id)
    return run_id


def test_purges_settled_runs_past_retention_and_every_row_they_left(
    store: Store, clock: ManualClock, setup: tuple[WorkflowRegistry, _Mailer]
) -> None:
    registry, mailer = setup
    t0 = clock.now()
    completed = _complete_mailer(store, registry, mailer, t0, "o1")
    trigger(store, registry, "job.started", {**T0_EVENT, "id": "j1"}, t0)
    failed = run_id_for("failing", "j1")
    trigger(store, registry, "nap.started", {**T0_EVENT, "id": "n1"}, t0)
    cancelled = run_id_for("sleeper", "n1")
    ops.cancel_run(store, TENANT_A, cancelled, t0)
    _work(store, registry, t0, mailer)
    assert (_status(store, failed), _status(store, cancelled)) == ("failed", "cancelled")
    # A run settled later, and one still waiting (its timer is far off).
    later = t0 + timedelta(days=20)
    recent = _complete_mailer(store, registry, mailer, later, "o2")
    trigger(store, registry, "nap.started", {**T0_EVENT, "id": "n2"}, later)
    waiting = run_id_for("sleeper", "n2")
    before = {run: _counts(store, run) for run in (completed, failed, cancelled, waiting, recent)}
    assert before[completed]["dispatch_outbox"] == 1 and before[completed]["task_queue"] == 1
    assert before[completed]["run_consumed_events"] == 1 and before[completed]["run_results"] > 0

    result = purge_settled_runs(store, t0 + timedelta(days=31), registry=registry)

    assert result.runs == 3 and not result.more_left
    for run in (completed, failed, cancelled):
        assert _counts(store, run) == dict.fromkeys(RUN_TABLES, 0), run
    for run in (waiting, recent):
        assert _counts(store, run) == before[run], run
    assert result.events == sum(
        before[r]["wf_events (run)"] + before[r]["wf_events (dispatch)"]
        for r in (completed, failed, cancelled)
    )
    assert result.outbox_rows == 1
    assert _status(store, waiting) == "waiting"


def test_a_workflows_own_retention_overrides_the_default(
    store: Store, clock: ManualClock, setup: tuple[WorkflowRegistry, _Mailer]
) -> None:
    registry, _ = setup
    t0 = clock.now()
    trigger(store, registry, "blip", {**T0_EVENT, "id": "b1"}, t0)
    trigger(store, registry, "audit", {**T0_EVENT, "id": "a1"}, t0)
    trigger(store, registry, "nap.started", {**T0_EVENT, "id": "n1"}, t0)
    ops.cancel_run(store, TENANT_A, run_id_for("sleeper", "n1"), t0)
    ops.project_pending(store, t0)

    three_days = purge_settled_runs(store, t0 + timedelta(days=3), registry=registry)
    assert three_days.runs == 1 and _status(store, run_id_for("short-lived", "b1")) is None
    assert _status(store, run_id_for("sleeper", "n1")) == "cancelled"

    years = purge_settled_runs(store, t0 + timedelta(days=3650), registry=registry)
    assert years.runs == 1 and _status(store, run_id_for("sleeper", "n1")) is None
    assert _status(store, run_id_for("kept", "a1")) == "completed"  # retention="forever"

    # A workflow this deployment no longer registers keeps the default retention.
    trigger(store, registry, "blip", {**T0_EVENT, "id": "b2"}, t0)
    registry.unregister("short-lived")
    assert purge_settled_runs(store, t0 + timedelta(days=3), registry=registry).runs == 0
    assert purge_settled_runs(store, t0 + timedelta(days=31), registry=registry).runs == 1
    # The default "forever" keeps them all.
    trigger(store, registry, "nap.started", {**T0_EVENT, "id": "n9"}, t0)
    ops.cancel_run(store, TENANT_A, run_id_for("sleeper", "n9"), t0)
    ops.project_pending(store, t0)
    kept = purge_settled_runs(
        store, t0 + timedelta(days=3650), registry=registry, default_retention=None
    )
    assert kept.runs == 0 and _status(store, run_id_for("sleeper", "n9")) == "cancelled"


def test_inbox_rows_go_only_when_nothing_references_or_may_read_them(
    store: Store, clock: ManualClock, setup: tuple[WorkflowRegistry, _Mailer]
) -> None:
    registry, mailer = setup
    t0 = clock.now()
    inbox = "SELECT event_id FROM inbox WHERE tenant_id = %(t)s::uuid ORDER BY position"

    def events(tenant: str = TENANT_A) -> list[str]:
        return [r["event_id"] for r in store.conn.execute(inbox, {"t": tenant}).fetchall()]

    # Purged with its run: trigger and awaited event (both referenced only by it).
    _complete_mailer(store, registry, mailer, t0, "o1")
    # Kept: a run with a long retention references its trigger.
    trigger(store, registry, "audit", {**T0_EVENT, "id": "a1"}, t0, event_id="audit-trigger")
    # Deleted: an awaited event nobody took.
    ops.wake_on_event(store, event("order.paid", {**T0_EVENT, "id": "zz"}, event_id="stray"), t0)
    before_a = events()
    assert {"audit-trigger", "stray"} <= set(before_a) and len(before_a) == 4

    # Within INBOX_MIN_KEEP nothing goes from the inbox, whatever the retention.
    early = purge_settled_runs(
        store, t0 + timedelta(days=3), registry=registry, older_than=timedelta(days=2)
    )
    assert early.runs == 1 and early.inbox_rows == 0 and events() == before_a

    # Tenant B: run b completes on day 1 (its trigger and awaited event go with it); run
    # c starts on day 20 and waits; an event of the type c waits for, stored after c
    # started (inside its look-back), matches nothing yet and must stay.
    def b_event(type: str, key: str, event_id: str) -> Any:
        return event(type, {"tenantId": TENANT_B, "id": key}, TENANT_B, event_id)

    day1, day20 = t0 + timedelta(days=1), t0 + timedelta(days=20)
    trigger(store, registry, "order.placed", {"tenantId": TENANT_B, "id": "b"}, day1, TENANT_B)
    _work(store, registry, day1, mailer)
    ops.wake_on_event(store, b_event("order.paid", "b", "b-paid"), day1)
    _work(store, registry, day1, mailer)
    assert _status(store, run_id_for("mailer", "b"), TENANT_B) == "completed"
    trigger(store, registry, "order.placed", {"tenantId": TENANT_B, "id": "c"}, day20, TENANT_B)
    _work(store, registry, day20, mailer)
    ops.wake_on_event(store, b_event("order.paid", "other", "b-other"), day20 + timedelta(days=5))
    assert _status(store, run_id_for("mailer", "c"), TENANT_B) == "waiting"
    assert "b-paid" in events(TENANT_B) and "b-other" in events(TENANT_B)

    late = purge_settled_runs(store, t0 + timedelta(days=60), registry=registry)
    assert events() == ["audit-trigger"]
    assert "b-paid" not in events(TENANT_B) and "b-other" in events(TENANT_B)
    assert len(events(TENANT_B)) == 2  # b-other and c's trigger
    assert late.runs == 1 and late.inbox_rows == len(before_a) - 1 + 2


def test_a_pending_delivery_keeps_its_run_until_it_settles(
    store: Store, clock: ManualClock, setup: tuple[WorkflowRegistry, _Mailer]
) -> None:
    registry, mailer = setup
    t0 = clock.now()
    trigger(store, registry, "order.placed", {**T0_EVENT, "id": "o1"}, t0)
    run_id = run_id_for("mailer", "o1")
    ops.cancel_run(store, TENANT_A, run_id, t0)  # settled, its mail not delivered yet
    assert store.outbox.of_run(TENANT_A, run_id)[0].status == "pending"
    later = t0 + timedelta(days=40)

    assert purge_settled_runs(store, later, registry=registry).runs == 0
    assert _counts(store, run_id)["dispatch_outbox"] == 1

    dispatch_pending(store, lambda: later, mailer, _NoHttp(), WebhookGuard(), "x@example.com")
    ops.project_pending(store, later)
    assert purge_settled_runs(store, later + timedelta(days=31), registry=registry).runs == 1
    assert _counts(store, run_id) == dict.fromkeys(RUN_TABLES, 0)


def test_batches_are_bounded_and_say_when_more_is_left(
    store: Store, clock: ManualClock, setup: tuple[WorkflowRegistry, _Mailer]
) -> None:
    registry, _ = setup
    t0 = clock.now()
    for i in range(7):
        trigger(store, registry, "blip", {**T0_EVENT, "id": f"b{i}"}, t0)
    later = t0 + timedelta(days=3)
    first = purge_settled_runs(store, later, registry=registry, batch_size=3, max_batches=2)
    assert (first.runs, first.batches, first.more_left) == (6, 2, True)
    rest = purge_settled_runs(store, later, registry=registry, batch_size=3)
    assert rest.runs == 1 and not rest.more_left
    with pytest.raises(InvalidInput, match="batch size"):
        purge_settled_runs(store, later, registry=registry, batch_size=0)
    with pytest.raises(InvalidInput, match="minimum retention"):
        purge_settled_runs(store, later, registry=registry, older_than=timedelta(minutes=5))


def test_a_dry_run_counts_exactly_and_writes_nothing(
    store: Store, clock: ManualClock, setup: tuple[WorkflowRegistry, _Mailer]
) -> None:
    registry, mailer = setup
    t0 = clock.now()
    run_id = _complete_mailer(store, registry, mailer, t0, "o1")
    before = _counts(store, run_id)
    inbox_rows = store.conn.execute("SELECT count(*) FROM inbox").fetchone()
    later = t0 + timedelta(days=45)

    dry = purge_settled_runs(store, later, registry=registry, dry_run=True)

    assert dry.dry_run and dry.runs == 1 and dry.inbox_rows == 2
    assert _counts(store, run_id) == before
    assert store.conn.execute("SELECT count(*) FROM inbox").fetchone() == inbox_rows
    real = purge_settled_runs(store, later, registry=registry)
    assert (real.runs, real.events, real.inbox_rows, real.outbox_rows) == (
        dry.runs,
        dry.events,
        dry.inbox_rows,
        dry.outbox_rows,
    )


def test_events_the_projection_has_not_applied_keep_their_run(
    store: Store, clock: ManualClock, setup: tuple[WorkflowRegistry, _Mailer]
) -> None:
    registry, _ = setup
    t0 = clock.now()
    ops.ingest_domain_event(store, event("blip", {**T0_EVENT, "id": "b1"}), t0, registry)
    later = t0 + timedelta(days=3)
    assert purge_settled_runs(store, later, registry=registry).runs == 0
    ops.project_pending(store, later)
    assert purge_settled_runs(store, later, registry=registry).runs == 1


def test_two_purgers_at_once_purge_each_run_once(
    db_url: str, store: Store, clock: ManualClock, setup: tuple[WorkflowRegistry, _Mailer]
) -> None:
    registry, _ = setup
    t0 = clock.now()
    for i in range(60):
        ops.ingest_domain_event(store, event("blip", {**T0_EVENT, "id": f"b{i}"}), t0, registry)
    ops.project_pending(store, t0)
    later = t0 + timedelta(days=3)
    results: list[int] = []
    start = threading.Barrier(2)

    def purger() -> None:
        own = connect(db_url)
        try:
            start.wait()
            results.append(purge_settled_runs(own, later, registry=registry, batch_size=5).runs)
        finally:
            own.close()

    threads = [threading.Thread(target=purger) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(results) == 60 and len(results) == 2
    assert store.conn.execute("SELECT count(*) FROM workflow_runs").fetchone()["count"] == 0  # type: ignore[index]


def _settled_blips(store: Store, registry: WorkflowRegistry, t0: datetime, n: int) -> None:
    """n settled runs, each a second later than the one before (a fixed purge order)."""
    for i in range(n):
        at = t0 + timedelta(seconds=i)
        ops.ingest_domain_event(store, event("blip", {**T0_EVENT, "id": f"b{i}"}), at, registry)
    ops.project_pending(store, t0 + timedelta(seconds=n))


@contextmanager
def _oldest_runs_held(db_url: str, n: int) -> Iterator[None]:
    """Another session holds the row locks of the n oldest runs, as a purger or a
    redrive in the middle of its transaction does, until the block ends."""
    with psycopg.connect(db_url) as holder:
        holder.execute(
            "SELECT run_id FROM workflow_runs ORDER BY updated_at LIMIT %s FOR UPDATE", (n,)
        ).fetchall()
        yield
        holder.rollback()


def test_a_batch_short_of_runs_another_session_holds_goes_on_to_the_rest(
    db_url: str, store: Store, clock: ManualClock, setup: tuple[WorkflowRegistry, _Mailer]
) -> None:
    registry, _ = setup
    t0 = clock.now()
    _settled_blips(store, registry, t0, 12)
    later = t0 + timedelta(days=3)
    with _oldest_runs_held(db_url, 2):
        # Every batch of 5 sees the two held runs first and takes only 3 of its 5.
        held = purge_settled_runs(store, later, registry=registry, batch_size=5)
    assert (held.runs, held.more_left) == (10, False)
    assert purge_settled_runs(store, later, registry=registry, batch_size=5).runs == 2


def test_a_batch_whose_every_run_another_session_holds_stops_with_more_left(
    db_url: str, store: Store, clock: ManualClock, setup: tuple[WorkflowRegistry, _Mailer]
) -> None:
    registry, _ = setup
    t0 = clock.now()
    _settled_blips(store, registry, t0, 8)
    later = t0 + timedelta(days=3)
    with _oldest_runs_held(db_url, 5):
        held = purge_settled_runs(store, later, registry=registry, batch_size=5)
    assert (held.runs, held.batches, held.more_left) == (0, 1, True)
    assert purge_settled_runs(store, later, registry=registry, batch_size=5).runs == 8


def test_a_redrive_racing_a_purge_leaves_the_whole_run_or_nothing(
    db_url: str, store: Store, clock: ManualClock, setup: tuple[WorkflowRegistry, _Mailer]
) -> None:
    registry, _ = setup
    t0 = clock.now()
    trigger(store, registry, "job.started", {**T0_EVENT, "id": "j1"}, t0)
    trigger(store, registry, "job.started", {**T0_EVENT, "id": "j2"}, t0)
    later = t0 + timedelta(days=31)
    first, second = run_id_for("failing", "j1"), run_id_for("failing", "j2")

    # The redrive holds j1's summary while the purge runs: the purge skips j1 only.
    other = connect(db_url)
    try:
        with other.transaction():
            assert other.runs.lock(TENANT_A, first)
            assert purge_settled_runs(store, later, registry=registry).runs == 1
        assert _status(store, first) == "failed" and _status(store, second) is None
    finally:
        other.close()
    # A redrive after the purge finds no run (nothing written), never half of one.
    with pytest.raises(RunNotFound):
        redrive_run(store, TENANT_A, second, later, registry=registry)
    assert _counts(store, second) == dict.fromkeys(RUN_TABLES, 0)
    # The purge holds j1 (in a transaction not committed yet) while a redrive starts:
    # the redrive waits for the lock, then finds the run gone.
    outcome: list[BaseException | str] = []
    holder = connect(db_url)
    try:
        with holder.transaction():
            purged = purge_settled_runs(holder, later, registry=registry)
            assert purged.runs == 1

            def redrive() -> None:
                racer = connect(db_url)
                try:
                    outcome.append(redrive_run(racer, TENANT_A, first, later, registry).outcome)
                except BaseException as error:
                    outcome.append(error)
                finally:
                    racer.close()

            thread = threading.Thread(target=redrive)
            thread.start()
            thread.join(timeout=0.5)
            assert thread.is_alive()  # waiting for the summary lock
    finally:
        holder.close()
    thread.join()
    assert len(outcome) == 1 and isinstance(outcome[0], RunNotFound)
    assert _counts(store, first) == dict.fromkeys(RUN_TABLES, 0)


def test_a_child_stays_until_its_parents_join_has_counted_it(
    store: Store, clock: ManualClock, setup: tuple[WorkflowRegistry, _Mailer]
) -> None:
    from workflow_runner import on_call
    from workflow_runner.engine.children import start_children
    from workflow_runner.engine.joins import count_settled_children

    registry, mailer = setup
    register(
        registry,
        name="child",
        trigger=on_call(),
        retention="PT1H",
        steps=lambda s: [s.return_({"v": 1})],
    )
    register(
        registry,
        name="parent",
        trigger=on("parent.go"),
        idempotency_key=lambda e: e.payload["id"],
        steps=lambda s: [
            s.call_workflow("child", key="k", result_key="got"),
            s.wait(for_="P10D"),
            s.return_(lambda ctx: ctx.steps["got"]),
        ],
    )
    t0 = clock.now()
    trigger(store, registry, "parent.go", {**T0_EVENT, "id": "p1"}, t0)
    parent = run_id_for("parent", "p1")
    assert start_children(store, registry, t0).started == 1
    ops.project_pending(store, t0)
    (child,) = [r.run_id for r in store.runs.for_tenant(TENANT_A, "child")]
    assert _status(store, child) == "completed"  # settled, its join not told yet
    later = t0 + timedelta(hours=2)

    assert purge_settled_runs(store, later, registry=registry).runs == 0
    assert _status(store, child) == "completed"

    assert count_settled_children(store, later) == 1
    _work(store, registry, later, mailer)  # the parent resumes with the child's result
    assert _status(store, parent) == "waiting"
    assert purge_settled_runs(store, later, registry=registry).runs == 1
    assert _status(store, child) is None and _status(store, parent) == "waiting"
    children = "SELECT status, counted FROM run_children WHERE child_run_id = %(c)s::uuid"
    assert store.conn.execute(children, {"c": child}).fetchall() == [
        {"status": "completed", "counted": True}
    ]  # the parent's join keeps how its child ended
