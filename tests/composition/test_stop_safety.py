"""A map's stop is one transaction with the count that decides it: a crash anywhere in
it (between its cancels, or before the parent is told) leaves the join, its children
and the parent as they were, and the next count stops the map once: no child left
running that the stop cancels, none started that it stops (real PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

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
from workflow_runner import stream as ev
from workflow_runner.engine import joins
from workflow_runner.engine.children import start_children
from workflow_runner.engine.ingest import ingest_domain_event
from workflow_runner.engine.joins import count_settled_children
from workflow_runner.engine.passes import load_run
from workflow_runner.engine.projection import project_pending
from workflow_runner.engine.resume import resume_run
from workflow_runner.store import Store

from tests.support import TENANT_A

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
DUE = T0 + timedelta(minutes=1)


@pytest.fixture
def registry() -> WorkflowRegistry:
    reg = WorkflowRegistry()
    reg.register(
        define_workflow(
            name="kid",
            trigger=on_call(),
            steps=lambda s: [
                s.wait(for_=lambda ctx: f"PT{ctx.event.payload['m']}M"),
                s.return_({"n": Event.payload["n"]}),
            ],
            register=False,
        )
    )
    reg.register(
        define_workflow(
            name="first-wins",
            trigger=on_event("first.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.map(
                    Event.payload["items"],
                    workflow="kid",
                    concurrency=3,
                    result_key="batch",
                    completion=Completion(min_successful=1),
                ),
                s.return_(Steps["batch"]),
            ],
            register=False,
        )
    )
    return reg


def started_map(store: Store, registry: WorkflowRegistry) -> tuple[str, list[str]]:
    """A map over four items, three running; the first has just completed."""
    items = [{"n": 0, "m": 1}, {"n": 1, "m": 30}, {"n": 2, "m": 30}, {"n": 3, "m": 30}]
    event = DomainEvent(
        id="e1", type="first.go", payload={"id": "f1", "items": items}, tenant_id=TENANT_A
    )
    [run] = ingest_domain_event(store, event, T0, registry).started
    start_children(store, registry, T0)
    kids = [c.child_run_id for c in store.children.of_run(TENANT_A, run.run_id)]
    assert resume_run(store, TENANT_A, kids[0], 0, DUE, registry=registry).outcome == "completed"
    return run.run_id, kids


def statuses(store: Store, kids: list[str]) -> list[str]:
    return [
        load_run(store, TENANT_A, kid).status if store.streams.load(TENANT_A, kid) else "-"
        for kid in kids
    ]


def join_row(store: Store) -> dict[str, Any]:
    row = store.conn.execute(
        "SELECT closed_at, notified_at, settled FROM run_joins WHERE kind = 'map'"
    ).fetchone()
    assert row is not None
    return dict(row)


def crash_at(point: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if point == "between its cancels":
        real = joins.cancel_in_transaction
        calls = {"n": 0}

        def second_crashes(*args: Any, **kwargs: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 2:
                raise RuntimeError("the worker died between two cancels")
            return real(*args, **kwargs)

        monkeypatch.setattr(joins, "cancel_in_transaction", second_crashes)
    else:

        def crash(*args: Any, **kwargs: Any) -> bool:
            raise RuntimeError("the worker died before telling the parent")

        monkeypatch.setattr(joins, "_append_to_waiting_parent", crash)


@pytest.mark.parametrize("point", ["between its cancels", "before the parent is told"])
def test_a_crash_in_a_stop_leaves_everything_as_it_was_and_the_next_count_stops_once(
    store: Store, registry: WorkflowRegistry, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    parent, kids = started_map(store, registry)
    crash_at(point, monkeypatch)
    with pytest.raises(RuntimeError):
        count_settled_children(store, DUE)

    # Rolled back whole: nothing cancelled, the join open and its child not counted.
    assert statuses(store, kids) == ["completed", "waiting", "waiting", "-"]
    assert join_row(store) == {"closed_at": None, "notified_at": None, "settled": 0}
    assert ev.STEP_STOPPED not in [e.type for e in store.streams.load(TENANT_A, parent)]

    monkeypatch.undo()
    assert count_settled_children(store, DUE) == 1
    assert statuses(store, kids) == ["completed", "cancelled", "cancelled", "-"]
    assert start_children(store, registry, DUE).started == 0  # item 3 never starts
    project_pending(store, DUE)
    assert resume_run(store, TENANT_A, parent, 0, DUE, registry=registry).outcome == "completed"
    stops = [e.payload for e in store.streams.load(TENANT_A, parent) if e.type == ev.STEP_STOPPED]
    assert [(s["cancelled"], s.get("notStarted")) for s in stops] == [([1, 2], 1)]
    count_settled_children(store, DUE)  # the cancelled children, into the closed join
    running = store.conn.execute(
        "SELECT count(*) AS n FROM run_children WHERE status = 'running'"
    ).fetchone()
    assert running is not None and running["n"] == 0
