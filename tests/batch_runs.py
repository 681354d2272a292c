"""A run whose map stopped under its completion policy, for the tests of how runs are
shown (the CLI, the console, the graph)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from workflow_runner import (
    Completion,
    DomainEvent,
    Event,
    RetryPolicy,
    WorkflowRegistry,
    define_workflow,
    on_call,
    on_event,
)
from workflow_runner.engine import ingest_domain_event, project_pending, resume_run
from workflow_runner.engine.children import start_children
from workflow_runner.engine.joins import count_settled_children
from workflow_runner.store import Store

from tests.support import TENANT_A as TENANT

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SOON, LATE = T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)
MAPPER = define_workflow(
    name="shown-batch",
    trigger=on_event("shown.go"),
    idempotency_key=Event.payload["id"],
    steps=lambda s: [
        s.map(
            Event.payload["items"],
            workflow="shown-kid",
            result_key="batch",
            completion=Completion(min_successful=1, tolerated_failures=1),
        ),
        s.parallel(
            s.task("a", lambda ctx: 1, retry=RetryPolicy(at_most_once=True, max_attempts=1)),
            s.task("b", lambda ctx: 2),
            result_key="both",
            completion=Completion(tolerated_failure_pct=50),
        ),
    ],
    register=False,
)
KID = define_workflow(
    name="shown-kid",
    trigger=on_call(),
    steps=lambda s: [
        s.wait(for_=lambda ctx: f"PT{ctx.event.payload['m']}M"),
        s.branch(
            if_=Event.payload["bad"],
            on_true=[s.return_({"isSuccess": False})],
            on_false=[s.return_({"ok": True})],
        ),
    ],
    register=False,
)
REGISTRY = WorkflowRegistry()
REGISTRY.register(MAPPER)
REGISTRY.register(KID)


def stopped_map(store: Store) -> tuple[str, list[str]]:
    """shown-batch over three: item 0 fails, item 1 succeeds and stops item 2; the run
    goes on to its parallel. Returns the run and its children's runs."""
    items = [{"m": 1, "bad": True}, {"m": 2, "bad": False}, {"m": 30, "bad": False}]
    event = DomainEvent("e-1", "shown.go", {"id": "b1", "items": items}, TENANT, T0, "tests")
    [run] = ingest_domain_event(store, event, T0, REGISTRY).started
    start_children(store, REGISTRY, T0)
    kids = [c.child_run_id for c in store.children.of_run(TENANT, run.run_id)]
    for kid, now in ((kids[0], SOON), (kids[1], LATE)):
        resume_run(store, TENANT, kid, 0, now, registry=REGISTRY)
        count_settled_children(store, now)
    project_pending(store, LATE)
    resume_run(store, TENANT, run.run_id, 0, LATE, registry=REGISTRY)  # on to the parallel
    return run.run_id, kids
