"""Crashes, redeliveries and races around child runs, at the engine level on real
PostgreSQL: a child is never started twice, a completion is never lost or counted
twice, and a map's concurrency bound holds."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from workflow_runner import (
    DomainEvent,
    Event,
    Steps,
    WorkflowRegistry,
    define_workflow,
    on_call,
    on_event,
)
from workflow_runner import stream as ev
from workflow_runner.engine import joins, run_starts
from workflow_runner.engine.children import start_children
from workflow_runner.engine.ingest import ingest_domain_event
from workflow_runner.engine.joins import count_settled_children
from workflow_runner.engine.passes import load_run
from workflow_runner.engine.projection import project_pending
from workflow_runner.engine.resume import ResumeRequestItem, resume_run, resume_runs
from workflow_runner.store import Store, connect

from tests.support import TENANT_A

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def registry() -> WorkflowRegistry:
    reg = WorkflowRegistry()
    reg.register(
        define_workflow(
            name="kid",
            trigger=on_call(),
            steps=lambda s: [s.wait(for_="PT1M"), s.return_({"n": Event.payload["n"]})],
            register=False,
        )
    )
    reg.register(
        define_workflow(
            name="fan",
            trigger=on_event("fan.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.map(
                    Event.payload["items"],
                    workflow="kid",
                    concurrency=3,
                    result_key="all",
                ),
                s.return_({"isSuccess": True, "all": Steps["all"]}),
            ],
            register=False,
        )
    )
    return reg


def start_fan(store: Store, registry: WorkflowRegistry, n: int, run: str = "f1") -> str:
    event = DomainEvent(
        id=f"evt-{run}",
        type="fan.go",
        payload={"id": run, "items": [{"n": i} for i in range(n)]},
        tenant_id=TENANT_A,
    )
    [started] = ingest_domain_event(store, event, T0, registry).started
    return started.run_id


def runs_of(store: Store, workflow: str) -> list[Any]:
    return store.runs.for_tenant(TENANT_A, workflow_name=workflow, limit=10_000)


def running_children(store: Store) -> int:
    rows = store.conn.execute("SELECT count(*) AS n FROM run_children WHERE status = 'running'")
    return int(rows.fetchone()["n"])  # type: ignore[index]


def finish_kids(store: Store, registry: WorkflowRegistry, now: datetime) -> int:
    """Resume every waiting kid whose minute is up, then count them into their join (as
    the worker does after the resumes); how many passes ran."""
    done = 0
    for row in runs_of(store, "kid"):
        if row.status == "waiting":
            result = resume_run(store, TENANT_A, row.run_id, 0, now, registry=registry)
            done += result.outcome in ("completed", "failed")
    count_settled_children(store, now)
    return done


def test_a_crash_while_starting_children_starts_none_and_the_retry_starts_each_once(
    store: Store, registry: WorkflowRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    start_fan(store, registry, 3)
    real = run_starts.first_pass
    calls = {"n": 0}

    def crash_on_second(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("worker died")
        return real(*args, **kwargs)

    monkeypatch.setattr(run_starts, "first_pass", crash_on_second)
    with pytest.raises(RuntimeError):
        start_children(store, registry, T0)
    assert runs_of(store, "kid") == []  # the whole batch rolled back
    monkeypatch.setattr(run_starts, "first_pass", real)
    assert start_children(store, registry, T0).started == 3
    assert start_children(store, registry, T0).started == 0
    assert len(runs_of(store, "kid")) == 3
    assert running_children(store) == 3


def test_a_crash_in_the_last_childs_transaction_loses_no_completion(
    store: Store, registry: WorkflowRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = start_fan(store, registry, 1)
    start_children(store, registry, T0)
    later = T0 + timedelta(minutes=1)
    real = joins.close_joins

    def crash(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("crashed after the child's pass")

    # The last thing a pass that ends a run does, after its writes went out.
    monkeypatch.setattr("workflow_runner.engine.persist.close_joins", crash)
    with pytest.raises(RuntimeError):
        finish_kids(store, registry, later)
    [kid] = runs_of(store, "kid")
    assert kid.status == "waiting"  # the pass rolled back with the count
    monkeypatch.setattr("workflow_runner.engine.persist.close_joins", real)
    assert finish_kids(store, registry, later) == 1
    project_pending(store, later)
    assert resume_run(store, TENANT_A, parent, 0, later, registry=registry).outcome == "completed"
    settled = [e for e in store.streams.load(TENANT_A, parent) if e.type == ev.CHILDREN_SETTLED]
    assert len(settled) == 1


def test_a_redelivered_resume_of_a_child_counts_it_once(
    store: Store, registry: WorkflowRegistry
) -> None:
    parent = start_fan(store, registry, 2)
    start_children(store, registry, T0)
    later = T0 + timedelta(minutes=1)
    for row in runs_of(store, "kid"):
        first = resume_run(store, TENANT_A, row.run_id, 0, later, registry=registry)
        again = resume_run(store, TENANT_A, row.run_id, 0, later, registry=registry)
        assert (first.outcome, again.outcome) == ("completed", "already-resumed")
    assert count_settled_children(store, later) == 2
    assert count_settled_children(store, later) == 0
    join = store.conn.execute("SELECT settled, running, failed FROM run_joins").fetchone()
    assert join == {"settled": 2, "running": 0, "failed": 0}
    events = store.streams.load(TENANT_A, parent)
    assert [e.type for e in events].count(ev.CHILDREN_SETTLED) == 1


def test_two_workers_starting_children_at_once_keep_the_bound_and_start_each_once(
    db_url: str, store: Store, registry: WorkflowRegistry
) -> None:
    start_fan(store, registry, 12)
    barrier = threading.Barrier(2)
    counts: list[int] = []
    errors: list[BaseException] = []

    def worker() -> None:
        own = connect(db_url)
        try:
            barrier.wait()
            for _ in range(5):
                counts.append(start_children(own, registry, T0).started)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            own.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(counts) == 3 == len(runs_of(store, "kid"))  # concurrency 3
    assert running_children(store) == 3


def test_the_bound_holds_while_children_finish_and_slots_refill(
    store: Store, registry: WorkflowRegistry
) -> None:
    parent = start_fan(store, registry, 10)
    now = T0
    for _ in range(8):
        start_children(store, registry, now)
        assert running_children(store) <= 3
        now += timedelta(minutes=1)
        finish_kids(store, registry, now)
        assert running_children(store) <= 3
    project_pending(store, now)
    result = resume_run(store, TENANT_A, parent, 0, now, registry=registry)
    assert result.outcome == "completed"
    done = store.streams.load(TENANT_A, parent)[-1].payload["result"]
    assert [r["n"] for r in done["all"]] == list(range(10))


def test_a_parent_cancelled_before_its_last_child_ends_is_never_woken(
    store: Store, registry: WorkflowRegistry
) -> None:
    from workflow_runner.engine.cancel import cancel_run

    parent = start_fan(store, registry, 1)
    start_children(store, registry, T0)
    later = T0 + timedelta(minutes=1)
    cancel_run(store, TENANT_A, parent, later, "stop")
    [kid] = runs_of(store, "kid")
    assert kid.status == "cancelled"
    assert finish_kids(store, registry, later) == 0
    types = [e.type for e in store.streams.load(TENANT_A, parent)]
    assert types[-1] == ev.RUN_CANCELLED and ev.CHILDREN_SETTLED not in types


def test_doctor_finds_children_no_worker_started(store: Store, registry: WorkflowRegistry) -> None:
    from workflow_runner.engine.doctor import check_children

    parent = start_fan(store, registry, 2)
    assert check_children(store, None, T0 + timedelta(minutes=5)).status == "ok"
    late = check_children(store, TENANT_A, T0 + timedelta(minutes=11))
    assert late.status == "problem" and parent in late.items[0]
    start_children(store, registry, T0 + timedelta(minutes=11))
    assert check_children(store, None, T0 + timedelta(minutes=30)).status == "ok"


def test_a_crash_while_counting_loses_no_completion(
    store: Store, registry: WorkflowRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = start_fan(store, registry, 1)
    start_children(store, registry, T0)
    later = T0 + timedelta(minutes=1)
    [kid] = runs_of(store, "kid")
    resume_run(store, TENANT_A, kid.run_id, 0, later, registry=registry)
    real = joins._append_to_waiting_parent

    def crash(*args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("worker died while telling the parent")

    monkeypatch.setattr(joins, "_append_to_waiting_parent", crash)
    with pytest.raises(RuntimeError):
        count_settled_children(store, later)
    monkeypatch.setattr(joins, "_append_to_waiting_parent", real)
    assert count_settled_children(store, later) == 1  # the count rolled back with it
    project_pending(store, later)
    assert resume_run(store, TENANT_A, parent, 0, later, registry=registry).outcome == "completed"


def test_two_workers_counting_at_once_count_each_child_once(
    db_url: str, store: Store, registry: WorkflowRegistry
) -> None:
    parent = start_fan(store, registry, 3)
    start_children(store, registry, T0)
    later = T0 + timedelta(minutes=1)
    for row in runs_of(store, "kid"):
        resume_run(store, TENANT_A, row.run_id, 0, later, registry=registry)
    barrier = threading.Barrier(2)
    totals: list[int] = []

    def worker() -> None:
        own = connect(db_url)
        try:
            barrier.wait()
            totals.append(count_settled_children(own, later))
        finally:
            own.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(totals) == 3 and count_settled_children(store, later) == 0
    types = [e.type for e in store.streams.load(TENANT_A, parent)]
    assert types.count(ev.CHILDREN_SETTLED) == 1


def test_doctor_finds_settled_children_no_worker_counted(
    store: Store, registry: WorkflowRegistry
) -> None:
    from workflow_runner.engine.doctor import check_children

    start_fan(store, registry, 1)
    start_children(store, registry, T0)
    later = T0 + timedelta(minutes=1)
    [kid] = runs_of(store, "kid")
    resume_run(store, TENANT_A, kid.run_id, 0, later, registry=registry)
    assert check_children(store, None, later + timedelta(minutes=5)).status == "ok"
    stuck = check_children(store, None, later + timedelta(minutes=11))
    assert stuck.status == "problem" and "not counted" in stuck.summary
    count_settled_children(store, later)
    assert check_children(store, None, later + timedelta(minutes=11)).status == "ok"


def test_doctor_finds_a_child_that_settled_without_telling_its_join_and_repairs_it(
    store: Store, registry: WorkflowRegistry
) -> None:
    """The state issue 30's defect 1 left behind (a release before it, or a deploy with
    old and new code side by side): the child settled while its row says running."""
    from workflow_runner.engine.doctor import check_children
    from workflow_runner.engine.joins import tell_untold_children

    parent = start_fan(store, registry, 1)
    start_children(store, registry, T0)
    later = T0 + timedelta(minutes=1)
    [kid] = runs_of(store, "kid")
    resume_run(store, TENANT_A, kid.run_id, 0, later, registry=registry)
    store.conn.execute(
        "UPDATE run_children SET status = 'running', counted = true, settled_at = NULL"
    )  # as if the settle had not seen the row
    found = check_children(store, None, later)
    assert found.status == "problem" and "never told" in found.summary
    assert found.items == [f"{TENANT_A} run {parent}: child 0 ({kid.run_id}) is completed"]
    assert tell_untold_children(store, None, later) == 1
    assert check_children(store, None, later).status == "ok"
    count_settled_children(store, later)
    project_pending(store, later)
    state = load_run(store, TENANT_A, parent)
    assert state.children_settled is not None and state.children_settled.settled == 1


def _fail_fast_registry() -> WorkflowRegistry:
    def check(ctx: Any) -> int:
        if ctx.event.payload["n"] == 0:
            raise RuntimeError("kid 0 fails")
        return 1

    reg = WorkflowRegistry()
    reg.register(
        define_workflow(
            name="kid",
            trigger=on_call(),
            steps=lambda s: [s.wait(for_="PT1M"), s.compute("check", check)],
            register=False,
        )
    )
    reg.register(
        define_workflow(
            name="fan",
            trigger=on_event("fan.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [s.map(Event.payload["items"], workflow="kid", result_key="all")],
            register=False,
        )
    )
    return reg


def test_a_map_failing_fast_stops_its_due_child_before_a_resume_batch_takes_both(
    store: Store,
) -> None:
    """A batch claims all its runs first. The count that tells the parent a child failed
    stopped the map in its transaction (the other child cancelled, though due); the
    batch's parent pass fails the run and the child's resume finds it settled: both
    streams stay whole, nothing half-written."""
    registry = _fail_fast_registry()
    parent = start_fan(store, registry, 2)
    start_children(store, registry, T0)
    later = T0 + timedelta(minutes=1)
    first, other = (c.child_run_id for c in store.children.of_run(TENANT_A, parent))
    assert resume_run(store, TENANT_A, first, 0, later, registry=registry).outcome == "failed"
    count_settled_children(store, later)  # the parent is told: a child failed
    project_pending(store, later)
    assert load_run(store, TENANT_A, other).cancel_reason == "map stopped (child_failed)"

    items = [ResumeRequestItem(TENANT_A, parent, 0), ResumeRequestItem(TENANT_A, other, 0)]
    results = resume_runs(store, items, later, registry)

    assert [getattr(r, "outcome", r) for r in results] == ["failed", "already-resumed"]
    for run_id in (parent, other):
        events = store.streams.load(TENANT_A, run_id)
        assert [e.version for e in events] == list(range(1, len(events) + 1))
        [summary] = [r for r in store.runs.for_tenant(TENANT_A, limit=100) if r.run_id == run_id]
        assert (summary.version, summary.status) == (
            len(events),
            {ev.RUN_FAILED: "failed", ev.RUN_CANCELLED: "cancelled"}[events[-1].type],
        )
