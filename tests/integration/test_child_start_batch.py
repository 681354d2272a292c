"""A batch of child runs starts in a few round trips whatever its size (its runs claimed
in one statement, their first passes written in one pipeline), with the guarantees of
one start at a time: new, attached and unknown children of one batch each end as they
would alone, and a crash in the middle of a batch leaves nothing of it."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from workflow_runner import ManualClock, on_call, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.definition.branches import family_name
from workflow_runner.engine import children as children_module
from workflow_runner.engine.children import start_children
from workflow_runner.engine.run_starts import start_run
from workflow_runner.store import NewChild, Store

from tests.integration.test_held_statements import CountingConnection
from tests.support import TENANT_A, event, register, stream


def _fan(registry: WorkflowRegistry) -> None:
    """A parent mapping its items onto one-step children, all allowed at once."""
    register(
        registry,
        name="one-step",
        trigger=on_call(),
        steps=lambda s: [s.return_(lambda ctx: ctx.event.payload["i"])],
    )
    register(
        registry,
        name="fan",
        trigger=on_event("fan.go"),
        idempotency_key=lambda e: e.payload["id"],
        steps=lambda s: [
            s.map(
                lambda ctx: [{"i": i} for i in range(ctx.event.payload["n"])],
                workflow="one-step",
                concurrency=1000,
                result_key="all",
            ),
            s.return_(lambda ctx: sum(ctx.steps["all"])),
        ],
    )


def _children_rows(db_url: str) -> list[dict[str, Any]]:
    with psycopg.connect(db_url, row_factory=dict_row) as probe:
        return probe.execute(
            "SELECT item_index, child_run_id::text AS run_id, status FROM run_children"
            " ORDER BY join_id, item_index"
        ).fetchall()


def _round_trips_to_start(db_url: str, n: int, now: Any) -> tuple[int, int]:
    """Round trips and statements of start_children for one join of `n` one-step
    children."""
    registry = WorkflowRegistry()
    _fan(registry)
    conn = CountingConnection.connect(db_url, autocommit=True, row_factory=dict_row)
    store = Store(conn)
    try:
        ops.ingest_domain_event(store, event("fan.go", {"id": f"n{n}", "n": n}), now, registry)
        conn.round_trips, statements = 0, store.statements_sent
        done = start_children(store, registry, now, max_joins=1, batch=n)
        assert (done.joins, done.started) == (1, n)
        return conn.round_trips, store.statements_sent - statements
    finally:
        store.close()


def test_a_batch_of_children_starts_in_the_same_round_trips_whatever_its_size(
    db_url: str, clock: ManualClock
) -> None:
    few = _round_trips_to_start(db_url, 3, clock.now())
    many = _round_trips_to_start(db_url, 60, clock.now())
    assert many == few  # one at a time cost four round trips (and statements) more per child
    assert few[0] == 4  # claim, children to start, inputs + runs, mark + count + passes
    assert [r["status"] for r in _children_rows(db_url)] == ["completed"] * 63


def test_a_batch_mixing_new_attached_and_unknown_children_ends_each_as_alone(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, db_url: str
) -> None:
    """One batch of a parallel's family join: a new child, one whose run exists and has
    settled, one whose run exists and waits, one whose branch workflow is gone, and a
    second item naming the new child's run."""
    now = clock.now()
    register(
        registry,
        name="fam",
        trigger=on_event("fam.go"),
        steps=lambda s: [
            s.parallel(
                branches=[
                    [s.branch_result(lambda ctx: ctx.event.payload)],
                    [s.branch_result(lambda ctx: ctx.event.payload)],
                    [s.branch_result(lambda ctx: ctx.event.payload)],
                    [s.wait(for_="PT1M")],
                    [s.branch_result(lambda ctx: ctx.event.payload)],
                ],
                result_key="all",
            )
        ],
    )
    family = family_name("fam", "0", registry.latest("fam").version)
    registry.unregister("fam/0/branch-1")  # gone, as after a deploy that dropped it
    settled_run, waiting_run = run_id_for("x", "settled"), run_id_for("x", "waiting")
    with store.transaction():
        for run_id, name in ((settled_run, "fam/0/branch-2"), (waiting_run, "fam/0/branch-3")):
            call = event("workflow.call", {"early": True})
            assert start_run(store, registry.latest(name), call, run_id, now) is not None
    new_run = run_id_for("x", "new")
    children = [
        NewChild(0, new_run, "new", {"i": 0}),
        NewChild(1, run_id_for("x", "gone"), "gone", {"i": 1}),
        NewChild(2, settled_run, "settled", {"i": 2}),
        NewChild(3, waiting_run, "waiting", {"i": 3}),
        NewChild(4, new_run, "new", {"i": 4}),  # branch 4 exists; the run is item 0's
    ]
    parent = run_id_for("parent", "p")
    with store.transaction():
        join_id = run_id_for("join", "mixed")
        store.children.insert_join(
            TENANT_A, join_id, parent, "map", family, None, 10, True, children, now
        )
    done = start_children(store, registry, now, max_joins=1)
    assert (done.joins, done.started, done.attached, done.unknown) == (1, 1, 3, 1)
    rows = {r["item_index"]: r["status"] for r in _children_rows(db_url)}
    assert rows == {0: "completed", 1: "failed", 2: "completed", 3: "running", 4: "completed"}
    assert [e.type for e in stream(store, new_run)] == [ev.RUN_STARTED, ev.RUN_COMPLETED]
    assert [e.type for e in stream(store, waiting_run)] == [ev.RUN_STARTED, ev.STEP_WAITING]
    assert stream(store, run_id_for("x", "gone")) == []  # an unknown child has no run
    with psycopg.connect(db_url, row_factory=dict_row) as probe:
        join = probe.execute("SELECT next_index, running FROM run_joins").fetchone()
    assert join == {"next_index": 5, "running": 5}


def test_a_crash_in_the_middle_of_a_batch_leaves_nothing_of_it(
    store: Store, clock: ManualClock, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = WorkflowRegistry()
    _fan(registry)
    now = clock.now()
    ops.ingest_domain_event(store, event("fan.go", {"id": "crash", "n": 8}), now, registry)

    def crash(*args: Any) -> None:
        raise RuntimeError("worker died after the batch's last statement")

    with monkeypatch.context() as patched:
        patched.setattr(children_module, "count_settled_runs", crash)
        with pytest.raises(RuntimeError):
            start_children(store, registry, now, max_joins=1)
    assert {r["status"] for r in _children_rows(db_url)} == {"pending"}
    child_runs = [r["run_id"] for r in _children_rows(db_url)]
    assert all(stream(store, run_id) == [] for run_id in child_runs)
    done = start_children(store, registry, now, max_joins=1)
    assert (done.started, done.attached) == (8, 0)  # each started once, after the crash
    assert all(len(stream(store, run_id)) == 2 for run_id in child_runs)
    assert {r["status"] for r in _children_rows(db_url)} == {"completed"}
