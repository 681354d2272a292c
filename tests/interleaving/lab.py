"""What the interleaving tests of joins share (Lab and explore are in harness.py):
running everything there is to run until the runs come to rest, and the invariant
every join keeps at rest."""

from __future__ import annotations

from datetime import UTC, datetime

from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine.children import start_children
from workflow_runner.engine.doctor import check_children
from workflow_runner.engine.joins import count_settled_children
from workflow_runner.engine.passes import load_run
from workflow_runner.engine.resume import resume_run
from workflow_runner.store import Store
from workflow_runner.stream import SETTLED_STATUSES

from tests.support import TENANT_A, join_count_problems


def settle_everything(store: Store, registry: WorkflowRegistry, now: datetime) -> None:
    """Run everything there is to run, as the worker, projection and resumes would."""
    for _ in range(20):
        moved = count_settled_children(store, now)
        started = start_children(store, registry, now)
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
                    registry=registry,
                )
                moved += result.outcome != "already-resumed"
        if not moved:
            return
    raise AssertionError("the runs did not come to rest")


def assert_joins_whole(store: Store) -> None:
    """Every settled child is settled and counted in each of its joins that is open, the
    counters say what the rows say, and the doctor finds nothing wrong."""
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
    doctor = check_children(store, None, datetime(2100, 1, 1, tzinfo=UTC))
    assert doctor.status == "ok", doctor
