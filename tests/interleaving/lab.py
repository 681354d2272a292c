"""What every interleaving test runs on: a database per schedule, copied from one
prepared state, and `explore`, which runs two operations in every split order
(harness.py) and checks each outcome."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.embedded import database_url
from workflow_runner.engine.children import start_children
from workflow_runner.engine.doctor import check_children
from workflow_runner.engine.joins import count_settled_children
from workflow_runner.engine.passes import load_run
from workflow_runner.engine.resume import resume_run
from workflow_runner.store import Store, connect
from workflow_runner.stream import SETTLED_STATUSES

from tests.interleaving.harness import Interleaving, Run, Schedule
from tests.support import TENANT_A, join_count_problems


@dataclass
class Lab:
    admin_url: str
    template: str

    def database(self, template: str | None = None) -> str:
        name = f"wfr_i_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(
                f'CREATE DATABASE "{name}" TEMPLATE "{template or self.template}" '
                "STRATEGY FILE_COPY"
            )
        return name

    def drop(self, name: str) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def url(self, name: str) -> str:
        return database_url(self.admin_url, name)


Operation = Callable[[Store], Any]
Check = Callable[[Store, Run], None]


def explore(
    lab: Lab,
    setup: Callable[[Store], None],
    first: Operation,
    second: Operation,
    check: Check,
) -> int:
    """Run `first` and `second` in every split order on copies of the state `setup`
    makes, and `check` each outcome. Returns the schedules run."""
    prepared = lab.database()
    try:
        store = connect(lab.url(prepared))
        try:
            setup(store)
        finally:
            store.close()
        schedules = 0
        for order in (0, 1):
            steps = 0
            while True:
                name = lab.database(prepared)
                try:
                    run = Interleaving(lab.url(name), first, second).run(Schedule(order, steps))
                    schedules += 1
                    store = connect(lab.url(name))
                    try:
                        check(store, run)
                    except AssertionError as error:
                        raise AssertionError(f"{run.describe()}\n{error}") from error
                    finally:
                        store.close()
                finally:
                    lab.drop(name)
                if run.ended_first:
                    break
                steps += 1
        return schedules
    finally:
        lab.drop(prepared)


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
