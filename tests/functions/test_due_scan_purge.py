"""DueScan purges settled runs past their retention after its scan, within its small
budget, and reports what it purged as metrics."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from workflow_runner import DomainEvent, ManualClock, define_workflow, on_event, run_id_for
from workflow_runner.aws.inprocess import FakeLambdaContext, build_inprocess_runtime
from workflow_runner.aws.template import Handler
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine import ingest_domain_event, project_pending
from workflow_runner.ports import Runtime, set_runtime
from workflow_runner.settings import Settings
from workflow_runner.store import Store

from tests.functions.helpers import TENANT, Emitted, load_event


@pytest.fixture
def workflows() -> WorkflowRegistry:
    registry = WorkflowRegistry()
    for name, retention, steps in (
        ("blip", "PT1H", lambda s: [s.return_({"ok": True})]),
        ("nap", None, lambda s: [s.wait(for_="PT2H"), s.return_(None)]),
    ):
        registry.register(
            define_workflow(
                name=name,
                trigger=on_event(f"{name}.requested"),
                idempotency_key=lambda e: e.payload["id"],
                retention=retention,
                steps=steps,
                register=False,
            )
        )
    return registry


def _runtime(
    store: Store, clock: ManualClock, db_url: str, registry: WorkflowRegistry, **settings: object
) -> Runtime:
    return build_inprocess_runtime(
        store,
        clock,
        settings=Settings(database_url=db_url, **settings),  # type: ignore[arg-type]
        registry=registry,
    )


@pytest.fixture
def install() -> Iterator[Callable[[Runtime], None]]:
    yield set_runtime
    set_runtime(None)


def _start(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, name: str, key: str
) -> str:
    event = DomainEvent(
        str(uuid.uuid4()), f"{name}.requested", {"id": key}, TENANT, clock.now(), "t"
    )
    ingest_domain_event(store, event, clock.now(), registry)
    project_pending(store, clock.now())
    return run_id_for(name, key)


def test_due_scan_purges_after_scanning_and_counts_it(
    handlers: dict[str, Handler],
    store: Store,
    clock: ManualClock,
    db_url: str,
    workflows: WorkflowRegistry,
    install: Callable[[Runtime], None],
    emitted: Callable[[], Emitted],
) -> None:
    install(_runtime(store, clock, db_url, workflows))
    done = [_start(store, workflows, clock, "blip", f"b{i}") for i in range(3)]
    sleeper = _start(store, workflows, clock, "nap", "n1")
    clock.advance(timedelta(hours=2))

    result = handlers["DueScanFunction"](load_event("due-scan-schedule.json"), FakeLambdaContext())

    assert result["leased"] == 1  # the scan still handed the due timer out
    assert [store.runs.get(TENANT, run) for run in done] == [None, None, None]
    assert store.runs.get(TENANT, sleeper) is not None
    out = emitted()
    assert out.metric("RunsPurged") == 3
    assert out.metric("PurgedEvents") == 3 * 2  # run-started, run-completed
    assert out.metric("PurgeBacklogLeft") == 0


def test_due_scan_purges_nothing_when_its_purge_budget_is_zero(
    handlers: dict[str, Handler],
    store: Store,
    clock: ManualClock,
    db_url: str,
    workflows: WorkflowRegistry,
    install: Callable[[Runtime], None],
    emitted: Callable[[], Emitted],
) -> None:
    install(_runtime(store, clock, db_url, workflows, purge_max_seconds=0))
    run = _start(store, workflows, clock, "blip", "b1")
    clock.advance(timedelta(hours=2))

    handlers["DueScanFunction"](load_event("due-scan-schedule.json"), FakeLambdaContext())

    assert store.runs.get(TENANT, run) is not None
    assert all("RunsPurged" not in blob for blob in emitted().metrics)


def test_due_scan_purge_stops_at_its_batch_bound_and_says_more_is_left(
    handlers: dict[str, Handler],
    store: Store,
    clock: ManualClock,
    db_url: str,
    workflows: WorkflowRegistry,
    install: Callable[[Runtime], None],
    emitted: Callable[[], Emitted],
) -> None:
    install(_runtime(store, clock, db_url, workflows, purge_batch_size=2))
    for i in range(5):
        _start(store, workflows, clock, "blip", f"b{i}")
    clock.advance(timedelta(hours=2))

    handlers["DueScanFunction"](load_event("due-scan-schedule.json"), FakeLambdaContext())

    # No max batches in the function: batches of 2 until nothing is left, within budget.
    assert emitted().metric("RunsPurged") == 5
    assert store.conn.execute("SELECT count(*) FROM workflow_runs").fetchone() == {"count": 0}
