"""Concurrency: many workers (threads and processes) running the pending projection,
due scans and resumes over thousands of runs at once, while awaited events race the
suspensions: exactly one `resumed` per suspension, no lost wakeup, and two tenants
sharing every run id never interfere."""

from __future__ import annotations

import multiprocessing
import os
import random
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from workflow_runner import RetryPolicy, define_workflow, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.definition.dsl import WorkflowDefinition
from workflow_runner.engine.tasks import run_task
from workflow_runner.errors import TransientStoreError
from workflow_runner.store import connect

from tests.reliability.harness import TENANT_A, TENANT_B, check_invariants, record
from tests.support import event, task_ports

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=10)


def _race_workflow() -> WorkflowDefinition:
    return define_workflow(
        name="race",
        trigger=on_event("race.started"),
        idempotency_key=lambda e: e.payload["k"],
        awaits={"go": "race.go"},
        register=False,
        steps=lambda s: [
            s.wait(for_="PT1M"),
            s.wait_for_event(
                "race.go",
                match=lambda ctx: {
                    "version": 1,
                    "expr": {
                        "kind": "atom",
                        "path": ["k"],
                        "op": {"kind": "eq", "value": ctx.event.payload["k"]},
                    },
                },
                timeout="P30D",
            ),
            s.compute("got", lambda ctx: ctx.steps["race.go"]["k"]),
            s.return_(lambda ctx: {"k": ctx.steps["got"]}),
        ],
    )


def _worker(db_url: str, seed: int, stop_at: float, tenants: list[str]) -> int:
    """Project, scan and resume in a loop until the deadline; returns resumes done."""
    registry = WorkflowRegistry()
    registry.register(_race_workflow())
    rng = random.Random(seed)
    store = connect(db_url)
    done = 0
    try:
        while time.monotonic() < stop_at:
            try:
                ops.project_pending(store, LATER, batch_size=200, max_batches=1)
                tenant = rng.choice(tenants)
                rows = store.pending.due(tenant, LATER, 50)
                rng.shuffle(rows)
                for row in rows:
                    result = ops.resume_run(
                        store, tenant, row.run_id, row.step_index, LATER, registry=registry
                    )
                    done += result.outcome != "already-resumed"
                if not rows:
                    time.sleep(0.01)
            except TransientStoreError:
                continue  # a deadlock victim retries, as the queue would redeliver
    finally:
        store.close()
    return done


def _process_worker(args: tuple[str, int, float, list[str]]) -> int:
    db_url, seed, seconds, tenants = args
    return _worker(db_url, seed, time.monotonic() + seconds, tenants)


def _start_runs(db_url: str, registry: WorkflowRegistry, n: int) -> None:
    store = connect(db_url)
    try:
        for i in range(n):
            for tenant in (TENANT_A, TENANT_B):
                ops.ingest_domain_event(
                    store,
                    event("race.started", {"tenantId": tenant, "k": f"k{i}"}, tenant=tenant),
                    NOW,
                    registry,
                )
    finally:
        store.close()


def _send_events(db_url: str, n: int, seed: int) -> None:
    """Awaited events in random order: some before the wait is reached, some during the
    projection's catch-up, some after."""
    rng = random.Random(seed)
    store = connect(db_url)
    order = [(t, i) for i in range(n) for t in (TENANT_A, TENANT_B)]
    rng.shuffle(order)
    try:
        for tenant, i in order:
            e = event("race.go", {"tenantId": tenant, "k": f"k{i}"}, tenant=tenant)
            for _ in range(5):
                try:
                    ops.wake_on_event(store, e, NOW + timedelta(seconds=30))
                    break
                except TransientStoreError:
                    continue
            if rng.random() < 0.3:
                time.sleep(0.001)
    finally:
        store.close()


def _run(db_url: str, runs: int, threads: int, processes: int, seconds: float) -> None:
    registry = WorkflowRegistry()
    registry.register(_race_workflow())
    _start_runs(db_url, registry, runs)
    tenants = [TENANT_A, TENANT_B]
    stop_at = time.monotonic() + seconds
    sender = threading.Thread(target=_send_events, args=(db_url, runs, 7))
    pool = [
        threading.Thread(target=_worker, args=(db_url, i, stop_at, tenants)) for i in range(threads)
    ]
    sender.start()
    for t in pool:
        t.start()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(processes) if processes else _NoPool() as procs:
        if processes:
            procs.map(
                _process_worker, [(db_url, 100 + i, seconds, tenants) for i in range(processes)]
            )
    sender.join()
    for t in pool:
        t.join()
    # Drain what is left on one worker (every resume is idempotent).
    store = connect(db_url)
    try:
        for _ in range(50):
            ops.project_pending(store, LATER)
            rows = [(t, r) for t in tenants for r in store.pending.due(t, LATER, 1000)]
            if not rows:
                break
            for tenant, row in rows:
                ops.resume_run(store, tenant, row.run_id, row.step_index, LATER, registry=registry)
        ops.project_pending(store, LATER)
        assert check_invariants(store, registry) == []
        statuses = store.conn.execute(
            "SELECT tenant_id::text AS t, status, count(*) AS n FROM workflow_runs GROUP BY 1, 2"
        ).fetchall()
        assert {(r["t"], r["status"]): r["n"] for r in statuses} == {
            (TENANT_A, "completed"): runs,
            (TENANT_B, "completed"): runs,
        }
        # No lost wakeup: every wait was resumed by its event, never by the timeout.
        by = store.conn.execute(
            "SELECT payload->>'resumedBy' AS by, count(*) AS n FROM wf_events "
            "WHERE type = %s GROUP BY 1",
            (ev.STEP_RESUMED,),
        ).fetchall()
        assert {r["by"]: r["n"] for r in by} == {"timer": 2 * runs, "event": 2 * runs}
        # Tenants sharing run ids: each run's result is its own key, in its own tenant.
        results = store.conn.execute(
            "SELECT tenant_id::text AS t, stream_id::text AS s, payload->'result'->>'k' AS k "
            "FROM wf_events WHERE type = %s",
            (ev.RUN_COMPLETED,),
        ).fetchall()
        for r in results:
            assert run_id_for("race", r["k"]) == r["s"]
        record(
            runs_driven=2 * runs,
            concurrent_workers=threads + processes + 1,
            lost_wakeups=0,
            duplicate_resumes=0,
        )
    finally:
        store.close()


class _NoPool:
    def __enter__(self) -> _NoPool:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def test_threads_and_processes_resume_each_suspension_exactly_once(db_url: str) -> None:
    _run(db_url, runs=150, threads=3, processes=1, seconds=4.0)


@pytest.mark.soak
def test_thousands_of_runs_under_many_workers(db_url: str) -> None:
    _run(db_url, runs=1500, threads=4, processes=max(2, (os.cpu_count() or 2)), seconds=40.0)


PARALLEL_TASKS = 120


def _wide_parallel() -> WorkflowDefinition:
    return define_workflow(
        name="wide",
        trigger=on_event("wide.started"),
        idempotency_key=lambda e: e.payload["k"],
        register=False,
        steps=lambda s: [
            s.parallel(
                *[
                    s.task(f"t{i}", lambda ctx, i=i: {"i": i}, retry=RetryPolicy(max_attempts=1))
                    for i in range(PARALLEL_TASKS)
                ],
                result_key="all",
            ),
            s.return_(lambda ctx: {"n": len(ctx.steps["all"])}),
        ],
    )


def test_a_wide_parallel_finished_by_many_task_workers_at_once_records_every_outcome(
    db_url: str,
) -> None:
    """One run's parallel of 120 tasks, run by four task workers at once: their
    outcomes keep landing on the same stream, and every one is recorded (an outcome
    that lost its version to the others six times used to be dropped, its task row
    cancelled, and the run left waiting for it)."""
    registry = WorkflowRegistry()
    registry.register(_wide_parallel())
    store = connect(db_url)
    [started] = ops.ingest_domain_event(
        store, event("wide.started", {"k": "w1"}, TENANT_A), NOW, registry
    ).started
    ports = task_ports(registry)
    outcomes: list[str] = []
    errors: list[BaseException] = []

    def task_worker(seed: int) -> None:
        mine = connect(db_url)
        rng = random.Random(seed)
        try:
            while True:
                try:
                    attempt = run_task(mine, ports, lambda: NOW, lambda: 60.0, rng)
                except TransientStoreError:
                    continue
                if attempt is None:
                    return
                outcomes.append(attempt.outcome)
        except BaseException as error:  # reported by the test
            errors.append(error)
        finally:
            mine.close()

    workers = [threading.Thread(target=task_worker, args=(i,)) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    try:
        assert not errors, errors
        assert sorted(set(outcomes)) == ["completed"] and len(outcomes) == PARALLEL_TASKS
        rows = store.conn.execute(
            "SELECT status, count(*) AS n FROM task_queue GROUP BY status"
        ).fetchall()
        assert {r["status"]: r["n"] for r in rows} == {"completed": PARALLEL_TASKS}
        result = ops.resume_run(store, TENANT_A, started.run_id, 0, NOW, registry=registry)
        assert result.outcome == "completed"
        assert check_invariants(store, registry) == []
        record(runs_driven=1, concurrent_workers=4)
    finally:
        store.close()
