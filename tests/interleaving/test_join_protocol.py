"""The join protocol, statement by statement (issue 30): a child settling, the worker
starting, attaching and counting children, a second parent attaching, a cancel and a
redrive — each pair run in every split order on real PostgreSQL (harness.py), with the
invariants checked after each schedule:

- every settled child is counted exactly once by each of its joins, and no parent waits
  on a child that has settled;
- no child starts twice;
- no run another open join or an independent start owns is cancelled, and a child whose
  every owner ended is cancelled with the last of them;
- nobody deadlocks.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from workflow_runner import (
    DomainEvent,
    Event,
    Steps,
    WorkflowRegistry,
    define_workflow,
    on_call,
    on_event,
    run_id_for,
)
from workflow_runner.engine.cancel import cancel_run
from workflow_runner.engine.children import start_children
from workflow_runner.engine.doctor import check_children
from workflow_runner.engine.ingest import ingest_domain_event
from workflow_runner.engine.joins import count_settled_children
from workflow_runner.engine.passes import load_run
from workflow_runner.engine.redrive import redrive_run
from workflow_runner.engine.resume import resume_run
from workflow_runner.store import Store
from workflow_runner.stream import SETTLED_STATUSES

from tests.interleaving.harness import Lab, Operation, Run, explore
from tests.support import TENANT_A, join_count_problems

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
DUE = T0 + timedelta(minutes=1)  # the children's timers are due
LATER = T0 + timedelta(days=2)  # every timer is due
BROKEN = {"after": True}


def _after(ctx: Any) -> int:
    if BROKEN["after"]:
        raise RuntimeError("a bug, fixed before the redrive")
    return 1


def _registry() -> WorkflowRegistry:
    registry = WorkflowRegistry()
    kid = define_workflow(
        name="kid",
        trigger=on_call(),
        steps=lambda s: [s.wait(for_="PT1M"), s.return_({"n": Event.payload["n"]})],
        register=False,
    )
    instant = define_workflow(
        name="instant",
        trigger=on_call(),
        steps=lambda s: [s.return_({"n": Event.payload["n"]})],
        register=False,
    )
    solo = define_workflow(
        name="solo",
        trigger=on_event("solo.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [s.wait(for_="PT1M"), s.return_({"n": 7})],
        register=False,
    )

    def caller(name: str, child: str) -> Any:
        return define_workflow(
            name=name,
            trigger=on_event(f"{name}.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.call_workflow(child, input={"n": 7}, key=Event.payload["key"], result_key="c"),
                s.return_({"isSuccess": True, "c": Steps["c"]}),
            ],
            register=False,
        )

    spawner = define_workflow(
        name="spawner",
        trigger=on_event("spawner.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.start_workflow("kid", input={"n": 1}),
            s.compute("after", _after),
            s.return_({"isSuccess": True}),
        ],
        register=False,
    )
    for definition in (
        kid,
        instant,
        solo,
        caller("call-kid", "kid"),
        caller("call-instant", "instant"),
        caller("call-solo", "solo"),
        spawner,
    ):
        registry.register(definition)
    return registry


REGISTRY = _registry()


# --- moving runs -------------------------------------------------------------------------


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


def run_of(workflow: str, key: str) -> str:
    return run_id_for(workflow, key)


def status(store: Store, run_id: str) -> str:
    return load_run(store, TENANT_A, run_id).status


def resume(run_id: str, step_index: int = 0, now: datetime = DUE) -> Operation:
    """A resume of `run_id` at `step_index`, as a queue message asks for it."""
    return lambda store: resume_run(store, TENANT_A, run_id, step_index, now, registry=REGISTRY)


def start_one_join(store: Store) -> Any:
    return start_children(store, REGISTRY, DUE, max_joins=1)


def count(store: Store) -> Any:
    return count_settled_children(store, DUE)


def cancel(run_id: str) -> Operation:
    return lambda store: cancel_run(store, TENANT_A, run_id, DUE, "not needed")


def quiesce(store: Store, now: datetime = LATER) -> None:
    """Run everything there is to run, as the worker, projection and resumes would."""
    for _ in range(20):
        moved = count_settled_children(store, now)
        started = start_children(store, REGISTRY, now)
        moved += started.started + started.attached + started.unknown
        for row in store.runs.for_tenant(TENANT_A, limit=1000):
            if row.status != "waiting":
                continue
            state = load_run(store, TENANT_A, row.run_id)
            assert state.suspension is not None
            if state.suspension.due_at <= now or state.outcome_ready:
                result = resume_run(
                    store,
                    TENANT_A,
                    row.run_id,
                    state.suspension.step_index,
                    now,
                    registry=REGISTRY,
                )
                moved += result.outcome != "already-resumed"
        if not moved:
            return
    raise AssertionError("the runs did not come to rest")


# --- invariants ----------------------------------------------------------------------------


def assert_joins_whole(store: Store) -> None:
    """Every settled child is settled and counted in each of its joins that is open, every
    join's counters say what its rows say, and the doctor finds nothing wrong."""
    rows = store.conn.execute(
        """
        SELECT c.join_id::text AS join_id, c.item_index, c.status, c.counted,
               r.status AS child_status, j.closed_at IS NULL AS open
        FROM run_children c
        JOIN run_joins j ON j.tenant_id = c.tenant_id AND j.join_id = c.join_id
        LEFT JOIN workflow_runs r ON r.tenant_id = c.tenant_id AND r.run_id = c.child_run_id
        """
    ).fetchall()
    for row in rows:
        if row["open"] and row["child_status"] in SETTLED_STATUSES:
            assert (row["status"], row["counted"]) == (row["child_status"], True), row
    assert join_count_problems(store) == []
    doctor = check_children(store, None, LATER + timedelta(days=1))
    assert doctor.status == "ok", doctor


def assert_completed(store: Store, *run_ids: str, c: Any = None) -> None:
    for run_id in run_ids:
        state = load_run(store, TENANT_A, run_id)
        assert state.status == "completed", (run_id, state.status, state.last_failure)


def assert_no_errors(run: Run) -> None:
    assert not run.errors, run.errors


# --- scenarios -------------------------------------------------------------------------------


def shared_child(store: Store, attached: bool) -> None:
    """P1 calls kid `shared`, which the worker started; P2 calls the same key: its join
    is due to start (`attached=False`) or attached already."""
    put(store, "call-kid", id="p1", key="shared")
    start_children(store, REGISTRY, T0)
    put(store, "call-kid", id="p2", key="shared")
    if attached:
        start_children(store, REGISTRY, T0)


P1, P2 = run_of("call-kid", "p1"), run_of("call-kid", "p2")
SHARED = run_of("kid", "shared")


def test_a_child_settling_while_a_second_parent_attaches_is_counted_in_both(lab: Lab) -> None:
    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        quiesce(store)
        assert_joins_whole(store)
        assert_completed(store, P1, P2, SHARED)

    assert explore(lab, lambda s: shared_child(s, False), resume(SHARED), start_one_join, check)


def test_a_child_settling_while_the_worker_counts_is_counted_once(lab: Lab) -> None:
    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        quiesce(store)
        assert_joins_whole(store)
        assert_completed(store, P1, P2, SHARED)

    explore(lab, lambda s: shared_child(s, True), resume(SHARED), count, check)


def test_two_workers_attaching_the_same_child_for_two_parents(lab: Lab) -> None:
    def setup(store: Store) -> None:
        shared_child(store, False)
        put(store, "call-kid", id="p3", key="shared")

    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        quiesce(store)
        assert_joins_whole(store)
        assert_completed(store, P1, P2, run_of("call-kid", "p3"), SHARED)

    explore(lab, setup, start_one_join, start_one_join, check)


def test_two_workers_one_starting_a_child_that_ends_at_once_the_other_attaching(
    lab: Lab,
) -> None:
    def setup(store: Store) -> None:
        put(store, "call-instant", id="p1", key="shared")
        put(store, "call-instant", id="p2", key="shared")

    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        quiesce(store)
        assert_joins_whole(store)
        assert_completed(store, run_of("call-instant", "p1"), run_of("call-instant", "p2"))
        assert len(store.runs.for_tenant(TENANT_A, workflow_name="instant")) == 1

    explore(lab, setup, start_one_join, start_one_join, check)


def test_two_parents_of_a_shared_child_cancelled_at_once_cancel_it_once(lab: Lab) -> None:
    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        assert (status(store, P1), status(store, P2)) == ("cancelled", "cancelled")
        assert status(store, SHARED) == "cancelled"  # its last owner took it along
        quiesce(store)
        assert_joins_whole(store)

    explore(lab, lambda s: shared_child(s, True), cancel(P1), cancel(P2), check)


def test_a_cancel_racing_a_second_parents_attach_leaves_it_the_child(lab: Lab) -> None:
    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        assert status(store, P1) == "cancelled"
        assert status(store, SHARED) == "waiting"  # P2's join owned it all along
        quiesce(store)
        assert_joins_whole(store)
        assert_completed(store, P2, SHARED)

    explore(lab, lambda s: shared_child(s, False), cancel(P1), start_one_join, check)


def test_a_cancel_racing_the_childs_end_settles_the_child_once(lab: Lab) -> None:
    def setup(store: Store) -> None:
        put(store, "call-kid", id="p1", key="shared")
        start_children(store, REGISTRY, T0)

    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        assert status(store, P1) == "cancelled"
        assert status(store, SHARED) in ("completed", "cancelled")
        terminal = store.conn.execute(
            "SELECT count(*) AS n FROM wf_events WHERE stream_id = %s AND type IN "
            "('workflow.run-completed', 'workflow.run-cancelled', 'workflow.run-failed')",
            (SHARED,),
        ).fetchone()
        assert terminal is not None and terminal["n"] == 1
        quiesce(store)
        assert_joins_whole(store)

    explore(lab, setup, cancel(P1), resume(SHARED), check)


def test_a_cancel_racing_the_count_of_a_settled_shared_child(lab: Lab) -> None:
    def setup(store: Store) -> None:
        shared_child(store, True)
        resume(SHARED)(store)  # settled, not counted yet

    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        quiesce(store)
        assert_joins_whole(store)
        assert status(store, P1) == "cancelled"
        assert_completed(store, P2, SHARED)

    explore(lab, setup, cancel(P1), count, check)


def test_a_cancel_never_takes_an_event_started_run_along_while_a_call_attaches(
    lab: Lab,
) -> None:
    solo = run_of("solo", "k1")
    caller = run_of("call-solo", "c1")

    def setup(store: Store) -> None:
        put(store, "solo", id="k1")
        put(store, "call-solo", id="c1", key="k1")

    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        assert status(store, caller) == "cancelled"
        assert status(store, solo) == "waiting"
        quiesce(store)
        assert_joins_whole(store)
        assert_completed(store, solo)

    explore(lab, setup, cancel(caller), start_one_join, check)


def test_a_redrive_racing_the_worker_starts_the_fire_and_forget_child_once(lab: Lab) -> None:
    spawner = run_of("spawner", "s1")

    def setup(store: Store) -> None:
        BROKEN["after"] = True
        put(store, "spawner", id="s1")
        BROKEN["after"] = False
        assert status(store, spawner) == "failed"

    def redrive(store: Store) -> Any:
        return redrive_run(store, TENANT_A, spawner, DUE, registry=REGISTRY)

    def check(store: Store, run: Run) -> None:
        assert_no_errors(run)
        quiesce(store)
        assert_joins_whole(store)
        assert_completed(store, spawner)
        assert len(store.runs.for_tenant(TENANT_A, workflow_name="kid")) == 1

    try:
        explore(lab, setup, redrive, start_one_join, check)
    finally:
        BROKEN["after"] = True
