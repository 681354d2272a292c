"""A parallel's task outcomes recorded at once by many workers: every outcome is
recorded, however often another worker's outcome takes the run's next version first
(real PostgreSQL, two connections).

An outcome is appended at the run's current version; another outcome committed
between its read and its append takes that version. It used to read again at most
five times and then take the run for moved on: its task row cancelled, its result
dropped, and the parallel waiting forever for it (found by a parallel of 200 tasks
on four workers: 7 results lost). Outcomes of one run now queue on a lock of the run,
so each reads the run after the one before it committed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from workflow_runner import (
    DomainEvent,
    Event,
    RetryPolicy,
    Steps,
    WorkflowRegistry,
    define_workflow,
    on_event,
)
from workflow_runner import stream as ev
from workflow_runner.engine import task_outcomes
from workflow_runner.engine.ingest import ingest_domain_event
from workflow_runner.engine.passes import load_run_for_pass
from workflow_runner.engine.resume import resume_run
from workflow_runner.engine.task_outcomes import record_success
from workflow_runner.store import ClaimedTask, Store, connect

from tests.support import TENANT_A

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
DONE = T0 + timedelta(seconds=5)
TASKS = 8


def _registry() -> WorkflowRegistry:
    registry = WorkflowRegistry()
    registry.register(
        define_workflow(
            name="quotes-8",
            trigger=on_event("quotes-8.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.parallel(
                    *[
                        s.task(f"t{i}", lambda ctx: {}, retry=RetryPolicy(max_attempts=1))
                        for i in range(TASKS)
                    ],
                    result_key="all",
                ),
                s.return_(Steps["all"]),
            ],
            register=False,
        )
    )
    return registry


REGISTRY = _registry()


@pytest.fixture
def other(db_url: str) -> Iterator[Store]:
    """A second worker's connection."""
    store = connect(db_url)
    yield store
    store.close()


def _claim_all(store: Store) -> tuple[str, dict[str, ClaimedTask]]:
    event = DomainEvent("q1", "quotes-8.go", {"id": "q1"}, TENANT_A, T0, "shop")
    [started] = ingest_domain_event(store, event, T0, REGISTRY).started
    claimed: dict[str, ClaimedTask] = {}
    for _ in range(TASKS):
        with store.transaction():
            task = store.tasks.claim(T0, 60_000, 10_000, 5.0)
        assert task is not None
        claimed[task.task_key] = task
    return started.run_id, claimed


def _waits_for_a_lock(store: Store, pid: int) -> bool:
    row = store.conn.execute(
        "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
    ).fetchone()
    return row is not None and row["wait_event_type"] == "Lock"


def _of_type(store: Store, run_id: str, type_: str) -> list[dict[str, Any]]:
    return [e.payload for e in store.streams.load(TENANT_A, run_id) if e.type == type_]


def test_an_outcome_that_keeps_losing_the_runs_version_to_other_outcomes_is_recorded(
    store: Store, other: Store, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worker A read the run before its attempt ran; t1 is recorded meanwhile, so A's
    first append misses, and after each of A's reads of the run another worker records
    one more outcome (t2, t3, ... as far as it can get before A appends)."""
    run_id, claimed = _claim_all(store)
    worker_a = connect(db_url)
    try:
        known = load_run_for_pass(worker_a, TENANT_A, run_id, tail=True).state
        record_success(other, claimed["t1"], {"from": "t1"}, DONE)
        rest = [claimed[f"t{i}"] for i in range(2, TASKS)]
        recorders: list[threading.Thread] = []
        failures: list[BaseException] = []
        read = load_run_for_pass

        def record_next() -> None:
            task = rest.pop(0)
            try:
                record_success(other, task, {"from": task.task_key}, DONE)
            except BaseException as error:  # the test's thread: reported below
                failures.append(error)

        def read_then_overtaken(reader: Store, *args: Any, **kwargs: Any) -> Any:
            run = read(reader, *args, **kwargs)
            if reader is worker_a and rest:
                # Another worker records an outcome now, before A appends: it commits
                # (A misses again) or queues behind A (A appends).
                recorder = threading.Thread(target=record_next)
                recorders.append(recorder)
                recorder.start()
                deadline = time.monotonic() + 10
                while recorder.is_alive() and time.monotonic() < deadline:
                    if _waits_for_a_lock(store, other.conn.info.backend_pid):
                        break
                    time.sleep(0.01)
            return run

        monkeypatch.setattr(task_outcomes, "load_run_for_pass", read_then_overtaken)
        outcome, due = record_success(worker_a, claimed["t0"], {"from": "t0"}, DONE, known)
        monkeypatch.undo()
        for recorder in recorders:
            recorder.join(10)
        assert not failures, failures
    finally:
        worker_a.close()
    while rest:
        task = rest.pop(0)
        record_success(other, task, {"from": task.task_key}, DONE)

    assert (outcome, due) == ("completed", False)  # recorded; others still to come then
    completed = _of_type(store, run_id, ev.TASK_COMPLETED)
    assert sorted(c["taskKey"] for c in completed) == [f"t{i}" for i in range(TASKS)]
    # Only the last outcome makes the run due (the stored form omits runDue when true).
    due_ones = [c["taskKey"] for c in completed if c.get("runDue", True)]
    assert due_ones == [completed[-1]["taskKey"]]
    statuses = store.conn.execute(
        "SELECT status, count(*) AS n FROM task_queue GROUP BY status"
    ).fetchall()
    assert {r["status"]: r["n"] for r in statuses} == {"completed": TASKS}
    assert resume_run(store, TENANT_A, run_id, 0, DONE, registry=REGISTRY).outcome == "completed"
    [done] = _of_type(store, run_id, ev.RUN_COMPLETED)
    assert done["result"] == [{"from": f"t{i}"} for i in range(TASKS)]
