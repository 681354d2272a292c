"""Completion decisions and stops, statement by statement (issue 33): the worker counting
a map's children decides its completion policy and stops it, racing a child that
settles, the worker starting the next child, a second parent attaching to a child the
stop would cancel, and the parent's cancel; two task workers recording a parallel's
outcomes at once; and an at-most-once attempt whose lease ran out racing the worker
that was still running it. Each pair runs in every split order on real PostgreSQL
(harness.py), with the invariants checked after each schedule:

- a child settles once (one terminal event), and is counted in every open join;
- the parent is told once, and records one stop, and comes to rest completed (or
  cancelled) with the batch its stop describes;
- after a stop no child of the map starts, none it cancelled runs on, and one another
  parent still waits for is never cancelled;
- a parallel records one decisive outcome per task and one stop; no stopped task row
  stays open, and a late outcome is not recorded;
- nobody deadlocks, and no operation fails.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from workflow_runner import (
    Completion,
    DomainEvent,
    Event,
    RetryPolicy,
    Steps,
    WorkflowRegistry,
    define_workflow,
    on_call,
    on_event,
    run_id_for,
)
from workflow_runner import stream as ev
from workflow_runner.aws.inprocess import CapturedMailer, RecordingHttpSender
from workflow_runner.engine.cancel import cancel_run
from workflow_runner.engine.children import start_children
from workflow_runner.engine.ingest import ingest_domain_event
from workflow_runner.engine.joins import count_settled_children
from workflow_runner.engine.passes import load_run
from workflow_runner.engine.resume import resume_run
from workflow_runner.engine.task_outcomes import record_success
from workflow_runner.engine.tasks import TaskPorts, run_task
from workflow_runner.store import ClaimedTask, Store
from workflow_runner.webhook_guard import WebhookGuard

from tests.interleaving.harness import Lab, Operation, Run, explore
from tests.interleaving.lab import assert_joins_whole, settle_everything
from tests.support import TENANT_A

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
DUE = T0 + timedelta(minutes=1)
LATER = T0 + timedelta(days=2)


def _registry() -> WorkflowRegistry:
    registry = WorkflowRegistry()
    registry.register(
        define_workflow(
            name="kid",
            trigger=on_call(),
            steps=lambda s: [
                s.wait(for_=lambda ctx: f"PT{ctx.event.payload.get('m', 1)}M"),
                s.return_({"n": Event.payload["n"]}),
            ],
            register=False,
        )
    )
    for name, needed, concurrency in (("one-of", 1, 3), ("two-of", 2, 2)):
        registry.register(
            define_workflow(
                name=name,
                trigger=on_event(f"{name}.go"),
                idempotency_key=Event.payload["id"],
                steps=lambda s, needed=needed, concurrency=concurrency: [
                    s.map(
                        Event.payload["items"],
                        workflow="kid",
                        key=lambda ctx: ctx.scope["item"].get("key"),
                        concurrency=concurrency,
                        result_key="batch",
                        completion=Completion(min_successful=needed),
                    ),
                    s.return_(Steps["batch"]),
                ],
                register=False,
            )
        )
    registry.register(
        define_workflow(
            name="caller",
            trigger=on_event("caller.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.call_workflow("kid", input={"n": 9, "m": 5}, key="shared", result_key="c"),
                s.return_(Steps["c"]),
            ],
            register=False,
        )
    )
    registry.register(
        define_workflow(
            name="quotes",
            trigger=on_event("quotes.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.parallel(
                    s.task("a", lambda ctx: {"q": "a"}, retry=RetryPolicy(max_attempts=1)),
                    s.task("b", lambda ctx: {"q": "b"}, retry=RetryPolicy(max_attempts=1)),
                    result_key="batch",
                    completion=Completion(min_successful=1),
                ),
                s.return_(Steps["batch"]),
            ],
            register=False,
        )
    )
    registry.register(
        define_workflow(
            name="charge",
            trigger=on_event("charge.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.task(
                    "charge",
                    lambda ctx: {"ok": True},
                    timeout="PT10S",
                    retry=RetryPolicy(max_attempts=1, at_most_once=True),
                    catch=True,
                ),
                s.return_(Steps["charge"]),
            ],
            register=False,
        )
    )
    return registry


REGISTRY = _registry()
PORTS = TaskPorts(
    REGISTRY,
    CapturedMailer(),
    RecordingHttpSender(),
    WebhookGuard(resolver=lambda host, port: ["93.184.215.14"]),
)


def put(store: Store, workflow: str, **payload: Any) -> str:
    event = DomainEvent(
        id=f"{workflow}-{payload['id']}",
        type=f"{workflow}.go",
        payload=payload,
        tenant_id=TENANT_A,
        time=T0,
    )
    [started] = ingest_domain_event(store, event, T0, REGISTRY).started
    return started.run_id


def kid(n: int, minutes: int = 1, key: str | None = None) -> dict[str, Any]:
    return {"n": n, "m": minutes, **({"key": key} if key else {})}


def children(store: Store, parent: str) -> dict[int, str]:
    return {c.item_index: c.child_run_id for c in store.children.of_run(TENANT_A, parent)}


def resume(run_id: str, now: datetime = DUE) -> Operation:
    return lambda store: resume_run(store, TENANT_A, run_id, 0, now, registry=REGISTRY)


def count(store: Store) -> Any:
    return count_settled_children(store, DUE)


def start_one_join(store: Store) -> Any:
    return start_children(store, REGISTRY, DUE, max_joins=1)


def terminal_events(store: Store, run_id: str) -> int:
    row = store.conn.execute(
        "SELECT count(*) AS n FROM wf_events WHERE stream_id = %s AND type = ANY(%s)",
        (run_id, list(ev.TERMINAL_TYPES)),
    ).fetchone()
    assert row is not None
    return int(row["n"])


def of_type(store: Store, run_id: str, type_: str) -> list[dict[str, Any]]:
    return [e.payload for e in store.streams.load(TENANT_A, run_id) if e.type == type_]


def started(store: Store, run_id: str) -> bool:
    return bool(store.streams.load(TENANT_A, run_id))


def assert_no_errors(run: Run) -> None:
    assert not run.errors, run.errors


def assert_map_came_to_rest(store: Store, parent: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The parent was told once and stopped once, settles completed with a batch that
    agrees with its stop, no child of it runs on, and every child settled once."""
    settle_everything(store, REGISTRY, LATER)
    assert_joins_whole(store)
    [stop] = of_type(store, parent, ev.STEP_STOPPED)
    assert len(of_type(store, parent, ev.CHILDREN_SETTLED)) == 1
    state = load_run(store, TENANT_A, parent)
    assert state.status == "completed", state.last_failure
    [done] = of_type(store, parent, ev.RUN_COMPLETED)
    batch = done["result"]
    assert batch["completion"] == "min_successful_reached"
    for index in stop["cancelled"]:
        assert batch["results"][index] is None
    for run_id in children(store, parent).values():
        if started(store, run_id):
            child = load_run(store, TENANT_A, run_id)
            assert child.settled and terminal_events(store, run_id) == 1, child.status
    return stop, batch


# --- a map's stop ------------------------------------------------------------------------


def test_a_stop_racing_a_child_that_settles_settles_it_once(lab: Lab) -> None:
    """one-of over three: children 0-2 run, 0 has completed (not counted yet); the count
    that decides races child 1's own end."""
    parent = run_id_for("one-of", "p1")

    def setup(store: Store) -> None:
        put(store, "one-of", id="p1", items=[kid(0), kid(1), kid(2, minutes=30)])
        start_children(store, REGISTRY, T0)
        resume(children(store, parent)[0])(store)

    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        child = children(store, parent)[1]
        state = load_run(store, TENANT_A, child)
        assert state.status in ("completed", "cancelled")
        assert terminal_events(store, child) == 1
        stop, batch = assert_map_came_to_rest(store, parent)
        # Cancelled by the stop, or ended first and counted with its result.
        assert (1 in stop["cancelled"]) == (state.status == "cancelled")
        assert 2 in stop["cancelled"]
        expected = None if state.status == "cancelled" else {"n": 1}
        assert batch["results"] == [{"n": 0}, expected, None]

    explore(lab, setup, count, lambda store: resume(children(store, parent)[1])(store), check)


def test_a_stop_racing_the_worker_starting_the_next_child_starts_none_after_it(
    lab: Lab,
) -> None:
    """two-of over four, two at once: child 0 completed and was counted (its slot is due
    to start child 2), child 1 completed since; the count that decides races the start."""
    parent = run_id_for("two-of", "p1")

    def setup(store: Store) -> None:
        put(store, "two-of", id="p1", items=[kid(0), kid(1, minutes=2), kid(2), kid(3)])
        start_children(store, REGISTRY, T0)
        resume(children(store, parent)[0])(store)
        count_settled_children(store, DUE)
        resume(children(store, parent)[1], T0 + timedelta(minutes=2))(store)

    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        begun = [i for i, r in children(store, parent).items() if started(store, r)]
        assert 3 not in begun  # never started, whatever the order
        stop, batch = assert_map_came_to_rest(store, parent)
        if 2 in begun:  # the worker started it first: the stop cancelled it
            assert stop["cancelled"] == [2] and stop["notStarted"] == 1
        else:
            assert stop["cancelled"] == [] and stop["notStarted"] == 2
        assert batch["results"] == [{"n": 0}, {"n": 1}, None, None]

    explore(lab, setup, count, start_one_join, check)


def test_a_stop_never_cancels_a_child_a_second_parent_attaches_to(lab: Lab) -> None:
    """one-of: child 1 (key `shared`) runs for the map; a caller's join names the same
    child and is due to attach to it; child 0 completed. The count that stops the map
    races the worker attaching the caller."""
    parent = run_id_for("one-of", "p1")
    shared = run_id_for("kid", "shared")

    def setup(store: Store) -> None:
        put(store, "one-of", id="p1", items=[kid(0), kid(1, minutes=5, key="shared")])
        start_children(store, REGISTRY, T0)
        put(store, "caller", id="c1")
        resume(children(store, parent)[0])(store)

    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        assert load_run(store, TENANT_A, shared).status == "waiting"  # never cancelled
        stop, batch = assert_map_came_to_rest(store, parent)
        assert stop["kept"] == [1] and stop["cancelled"] == []
        assert batch["results"] == [{"n": 0}, None]
        assert load_run(store, TENANT_A, run_id_for("caller", "c1")).status == "completed"

    explore(lab, setup, count, start_one_join, check)


def test_a_stop_racing_the_parents_cancel_leaves_no_child_running(lab: Lab) -> None:
    parent = run_id_for("one-of", "p1")

    def setup(store: Store) -> None:
        put(store, "one-of", id="p1", items=[kid(0), kid(1, minutes=30), kid(2, minutes=30)])
        start_children(store, REGISTRY, T0)
        resume(children(store, parent)[0])(store)

    def cancel(store: Store) -> Any:
        return cancel_run(store, TENANT_A, parent, DUE, "not needed")

    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        settle_everything(store, REGISTRY, LATER)
        assert_joins_whole(store)
        assert load_run(store, TENANT_A, parent).status == "cancelled"
        assert len(of_type(store, parent, ev.STEP_STOPPED)) <= 1
        for index in (1, 2):
            child = children(store, parent)[index]
            assert load_run(store, TENANT_A, child).status == "cancelled"
            assert terminal_events(store, child) == 1

    explore(lab, setup, count, cancel, check)


# --- a parallel's stop -------------------------------------------------------------------


def work_one(store: Store) -> Any:
    """One task worker: claims the oldest due task and runs it."""
    return run_task(store, PORTS, lambda: DUE, lambda: 60.0, random.Random(7))


def open_tasks(store: Store) -> int:
    row = store.conn.execute(
        "SELECT count(*) AS n FROM task_queue WHERE status IN ('pending', 'running')"
    ).fetchone()
    assert row is not None
    return int(row["n"])


def test_two_task_workers_recording_a_parallels_outcomes_at_once_decide_once(
    lab: Lab,
) -> None:
    """quotes: a parallel of two tasks that needs one success; two workers run them."""
    run_id = run_id_for("quotes", "q1")

    def setup(store: Store) -> None:
        put(store, "quotes", id="q1")

    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        outcomes = of_type(store, run_id, ev.TASK_COMPLETED) + of_type(
            store, run_id, ev.TASK_FAILED
        )
        [stop] = of_type(store, run_id, ev.STEP_STOPPED)
        assert len(outcomes) == 1  # the second one, if it ran, was not recorded
        assert {outcomes[0]["taskKey"], *stop["taskKeys"]} == {"a", "b"}
        assert open_tasks(store) == 0
        assert resume(run_id, LATER)(store).outcome == "completed"
        [done] = of_type(store, run_id, ev.RUN_COMPLETED)
        assert done["result"]["succeeded"] == 1
        assert done["result"]["completion"] == "min_successful_reached"

    explore(lab, setup, work_one, work_one, check)


# --- an at-most-once attempt whose lease ran out -----------------------------------------


def test_an_interrupted_attempt_found_while_its_worker_still_records_counts_once(
    lab: Lab,
) -> None:
    """charge (at most once, one attempt): a worker claimed the attempt at T0 and its
    lease ran out while it ran; it now records its result while another worker's claim
    finds the attempt interrupted. One outcome is recorded, the row is settled."""
    run_id = run_id_for("charge", "c1")
    claimed: dict[str, ClaimedTask] = {}
    after_lease = T0 + timedelta(minutes=1)

    def setup(store: Store) -> None:
        put(store, "charge", id="c1")
        with store.transaction():
            task = store.tasks.claim(T0, 60_000, 10_000, 5.0)
        assert task is not None
        claimed["task"] = task

    def slow_worker(store: Store) -> Any:
        # The first worker, alive after all, records what its call returned.
        return record_success(store, claimed["task"], {"ok": True}, after_lease)

    def next_claim(store: Store) -> Any:
        return run_task(store, PORTS, lambda: after_lease, lambda: 60.0, random.Random(7))

    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        completed = of_type(store, run_id, ev.TASK_COMPLETED)
        failed = of_type(store, run_id, ev.TASK_FAILED)
        assert len(completed) + len(failed) == 1
        if failed:
            assert failed[0]["reason"] == "task_interrupted"
        assert open_tasks(store) == 0
        assert resume(run_id, LATER)(store).outcome == "completed"
        [done] = of_type(store, run_id, ev.RUN_COMPLETED)
        expected = (
            {"ok": True}
            if completed
            else {"failed": True, "error": "TaskInterrupted", "attempts": 1}
        )
        assert done["result"] == expected

    explore(lab, setup, slow_worker, next_claim, check)
