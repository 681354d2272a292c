"""What reaches a run from outside its passes, at once: a parallel's task outcomes
recorded by many workers, and a callback answered while they land. Each is recorded
however often another outcome takes the run's next version first (real PostgreSQL,
two connections).

An outcome or an answer is appended at the run's current version; another outcome
committed between its read and its append takes that version. An outcome used to read
again at most five times and then take the run for moved on: its task row cancelled,
its result dropped, and the parallel waiting forever for it (found by a parallel of
200 tasks on four workers: 7 results lost); an answer was refused as `not_waiting`.
Both now queue on the run's answers lock, so each reads the run after the one before
it committed.
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
from workflow_runner.engine import callback_answers, task_outcomes
from workflow_runner.engine.callbacks import complete_callback
from workflow_runner.engine.ingest import ingest_domain_event
from workflow_runner.engine.passes import load_run_for_pass
from workflow_runner.engine.resume import resume_run
from workflow_runner.engine.task_outcomes import record_success
from workflow_runner.engine.tasks import run_task
from workflow_runner.store import ClaimedTask, Store, connect

from tests.support import TENANT_A, task_ports

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
DONE = T0 + timedelta(seconds=5)
TASKS = 8
TOKENS: list[str] = []


def _hand_out_token(ctx: Any) -> dict[str, str]:
    TOKENS.append(ctx.callbacks["approval"].token)
    return {}


def _quotes(s: Any, fn: Any) -> Any:
    """A parallel of TASKS one-attempt tasks `t0`.. running `fn`, stored under `all`."""
    once = RetryPolicy(max_attempts=1)
    return s.parallel(*[s.task(f"t{i}", fn, retry=once) for i in range(TASKS)], result_key="all")


def _registry() -> WorkflowRegistry:
    registry = WorkflowRegistry()
    for name, steps in (
        ("quotes-8", lambda s: [_quotes(s, lambda ctx: {}), s.return_(Steps["all"])]),
        (
            "quotes-approved",
            lambda s: [
                s.create_callback("approval"),
                _quotes(s, _hand_out_token),
                s.await_callback("approval", result_key="approved"),
                s.return_(Steps["approved"]),
            ],
        ),
    ):
        registry.register(
            define_workflow(
                name=name,
                trigger=on_event(f"{name}.go"),
                idempotency_key=Event.payload["id"],
                steps=steps,
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


def _start(store: Store, workflow: str) -> str:
    event = DomainEvent("q1", f"{workflow}.go", {"id": "q1"}, TENANT_A, T0, "shop")
    [started] = ingest_domain_event(store, event, T0, REGISTRY).started
    return started.run_id


def _claim(store: Store, count: int) -> dict[str, ClaimedTask]:
    """`count` task attempts claimed, as that many workers would, by task key."""
    claimed: dict[str, ClaimedTask] = {}
    for _ in range(count):
        with store.transaction():
            task = store.tasks.claim(T0, 60_000, 10_000, 5.0)
        assert task is not None
        claimed[task.task_key] = task
    return claimed


def _waits_for_a_lock(store: Store, pid: int) -> bool:
    row = store.conn.execute(
        "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
    ).fetchone()
    return row is not None and row["wait_event_type"] == "Lock"


def _of_type(store: Store, run_id: str, type_: str) -> list[dict[str, Any]]:
    return [e.payload for e in store.streams.load(TENANT_A, run_id) if e.type == type_]


class _Overtaking:
    """After each read of the run by `reader` (in `module`), another worker (`other`)
    records the next outcome of `rest` before the reader appends: it commits (the
    reader misses again) or queues behind the reader on the run's lock (the reader
    appends). `join()` waits for those workers and reports what they raised."""

    def __init__(self, reader: Store, other: Store, watcher: Store, rest: list[ClaimedTask]):
        self.reader, self.other, self.watcher, self.rest = reader, other, watcher, rest
        self.recorders: list[threading.Thread] = []
        self.failures: list[BaseException] = []

    def patch(self, monkeypatch: pytest.MonkeyPatch, module: Any) -> None:
        read = load_run_for_pass

        def read_then_overtaken(reader: Store, *args: Any, **kwargs: Any) -> Any:
            run = read(reader, *args, **kwargs)
            if reader is self.reader and self.rest:
                self._record_next()
            return run

        monkeypatch.setattr(module, "load_run_for_pass", read_then_overtaken)

    def _record_next(self) -> None:
        task = self.rest.pop(0)

        def record() -> None:
            try:
                record_success(self.other, task, {"from": task.task_key}, DONE)
            except BaseException as error:  # the test's thread: reported by join()
                self.failures.append(error)

        recorder = threading.Thread(target=record)
        self.recorders.append(recorder)
        recorder.start()
        pid = self.other.conn.info.backend_pid
        deadline = time.monotonic() + 10
        while recorder.is_alive() and time.monotonic() < deadline:
            if _waits_for_a_lock(self.watcher, pid):
                break
            time.sleep(0.01)

    def join(self) -> None:
        for recorder in self.recorders:
            recorder.join(10)
        assert not self.failures, self.failures
        while self.rest:  # what was not needed to overtake
            task = self.rest.pop(0)
            record_success(self.other, task, {"from": task.task_key}, DONE)


def test_an_outcome_that_keeps_losing_the_runs_version_to_other_outcomes_is_recorded(
    store: Store, other: Store, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worker A read the run before its attempt ran; t1 is recorded meanwhile, so A's
    first append misses, and after each of A's reads of the run another worker records
    one more outcome (t2, t3, ... as far as it can get before A appends)."""
    run_id = _start(store, "quotes-8")
    claimed = _claim(store, TASKS)
    worker_a = connect(db_url)
    try:
        known = load_run_for_pass(worker_a, TENANT_A, run_id, tail=True).state
        record_success(other, claimed["t1"], {"from": "t1"}, DONE)
        race = _Overtaking(worker_a, other, store, [claimed[f"t{i}"] for i in range(2, TASKS)])
        race.patch(monkeypatch, task_outcomes)
        outcome, due = record_success(worker_a, claimed["t0"], {"from": "t0"}, DONE, known)
        monkeypatch.undo()
        race.join()
    finally:
        worker_a.close()

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


def test_a_callback_answered_while_a_parallels_outcomes_land_is_kept_not_refused(
    store: Store, other: Store, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run created a callback and waits at a parallel; its first task hands the
    token out and the outside system answers while the other tasks end: after each of the answer's
    reads of the run another outcome is recorded. It used to lose five times and be
    refused as not waiting; it is kept for the await."""
    TOKENS.clear()
    run_id = _start(store, "quotes-approved")
    ports = task_ports(REGISTRY)
    first = run_task(store, ports, lambda: T0, lambda: 60.0)
    assert first is not None and first.outcome == "completed"  # it handed the token out
    [token] = TOKENS
    claimed = _claim(store, TASKS - 1)
    answering = connect(db_url)
    try:
        race = _Overtaking(answering, other, store, list(claimed.values()))
        race.patch(monkeypatch, callback_answers)
        answer = complete_callback(answering, token, {"ok": True}, DONE)
        monkeypatch.undo()
        race.join()
    finally:
        answering.close()

    assert answer.run_due is False  # kept for the await, not refused
    # The parallel (step 1) resumes; its await finds the answer kept and takes it.
    assert resume_run(store, TENANT_A, run_id, 1, DONE, registry=REGISTRY).outcome == "completed"
    [done] = _of_type(store, run_id, ev.RUN_COMPLETED)
    assert done["result"] == {"ok": True}
