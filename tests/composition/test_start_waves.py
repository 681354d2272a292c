"""A join gets one wave of children (START_BATCH) per `start_children` call, so the
children a wave settled are counted before the next wave starts: a map whose policy is
decided by its first wave starts no second one (real PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from workflow_runner import (
    Completion,
    DomainEvent,
    Event,
    Steps,
    WorkflowRegistry,
    define_workflow,
    on_call,
    on_event,
)
from workflow_runner.engine.children import START_BATCH, start_children
from workflow_runner.engine.ingest import ingest_domain_event
from workflow_runner.engine.joins import count_settled_children
from workflow_runner.store import Store

from tests.support import TENANT_A

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
ITEMS = 2 * START_BATCH + 50


def registry() -> WorkflowRegistry:
    """`one-step` ends in its first pass; `enough` needs one success, `all-of-them` has
    no policy; both allow every child at once."""
    reg = WorkflowRegistry()
    reg.register(
        define_workflow(
            name="one-step",
            trigger=on_call(),
            steps=lambda s: [s.return_({"n": Event.payload["n"]})],
            register=False,
        )
    )
    for name, completion in (("enough", Completion(min_successful=1)), ("all-of-them", None)):
        reg.register(
            define_workflow(
                name=name,
                trigger=on_event(f"{name}.go"),
                idempotency_key=Event.payload["id"],
                steps=lambda s, completion=completion: [
                    s.map(
                        Event.payload["items"],
                        workflow="one-step",
                        concurrency=10_000,
                        result_key="batch",
                        completion=completion,
                    ),
                    s.return_(Steps["batch"]),
                ],
                register=False,
            )
        )
    return reg


def start_map(store: Store, reg: WorkflowRegistry, name: str, run_key: str = "m1") -> str:
    items = [{"n": i} for i in range(ITEMS)]
    event = DomainEvent(
        id=f"{name}-{run_key}",
        type=f"{name}.go",
        payload={"id": run_key, "items": items},
        tenant_id=TENANT_A,
    )
    [run] = ingest_domain_event(store, event, T0, reg).started
    return run.run_id


def children_started(store: Store) -> int:
    row = store.conn.execute("SELECT count(*) AS n FROM run_children WHERE started_at IS NOT NULL")
    return int(row.fetchone()["n"])  # type: ignore[index]


def test_a_policy_decided_by_the_first_wave_starts_no_second_one(store: Store) -> None:
    reg = registry()
    start_map(store, reg, "enough")

    assert start_children(store, reg, T0).started == START_BATCH
    assert count_settled_children(store, T0) == START_BATCH  # min_successful reached: stop
    assert start_children(store, reg, T0).started == 0
    assert children_started(store) == START_BATCH


def test_a_map_without_a_policy_starts_every_wave_between_counts(store: Store) -> None:
    reg = registry()
    start_map(store, reg, "all-of-them")

    waves = []
    while (started := start_children(store, reg, T0).started) or count_settled_children(store, T0):
        waves.append(started)
    assert waves == [START_BATCH, START_BATCH, 50, 0]
    assert children_started(store) == ITEMS


@pytest.mark.parametrize("max_joins", [2, 10])
def test_one_call_still_starts_a_wave_of_each_due_join(store: Store, max_joins: int) -> None:
    reg = registry()
    start_map(store, reg, "all-of-them", "a")
    start_map(store, reg, "all-of-them", "b")

    done = start_children(store, reg, T0, max_joins=max_joins)

    assert (done.joins, done.started) == (2, 2 * START_BATCH)
