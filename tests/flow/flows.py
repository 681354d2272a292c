"""Workflows and helpers of the flow-control tests: each limit on a small workflow, and
the engine's stages driven by hand (ingest, resume, the task worker's claim and outcome,
the look after a commit), so a test says exactly which statement runs when."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from workflow_runner import (
    Batch,
    Concurrency,
    Debounce,
    DomainEvent,
    Event,
    RateLimit,
    Singleton,
    Steps,
    Throttle,
    WorkflowDefinition,
    WorkflowRegistry,
    define_workflow,
    on_event,
    run_id_for,
)
from workflow_runner.engine.ingest import ingest_domain_event
from workflow_runner.engine.passes import load_run
from workflow_runner.engine.resume import ResumeResult, resume_run
from workflow_runner.engine.tasks import TaskAttemptResult, TaskPorts, run_task
from workflow_runner.flow.tasks import claim_within_limits
from workflow_runner.flow.wake import wake_after_commit
from workflow_runner.store import ClaimedTask, Store

from tests.support import TENANT_A, task_ports

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


def _echo(ctx: Any) -> Any:
    return ctx.event.payload["n"]


def _account_and_global(name: str, global_limit: int, global_key: str) -> WorkflowDefinition:
    """A workflow whose one task is limited to one call at a time per account and
    `global_limit` across all tenants (key `global_key`)."""
    return define_workflow(
        name=name,
        trigger=on_event(f"{name}.go"),
        idempotency_key=Event.payload["n"],
        steps=lambda s: [
            s.task(
                "call",
                _echo,
                concurrency=[
                    Concurrency(1, key=Event.payload["account"]),
                    Concurrency(global_limit, key=global_key, scope="global"),
                ],
            ),
            s.return_({"n": Steps["call"]}),
        ],
        register=False,
    )


def _batch_ns(ctx: Any) -> Any:
    return [e.payload["n"] for e in ctx.events]


def _registry() -> WorkflowRegistry:
    registry = WorkflowRegistry()
    definitions = [
        # At most two runs of an account executing a pass or a task at once.
        define_workflow(
            name="per-account",
            trigger=on_event("per-account.go"),
            idempotency_key=Event.payload["n"],
            concurrency=Concurrency(2, key=Event.payload["account"]),
            steps=lambda s: [
                s.wait(for_="PT1M"),
                s.task("work", _echo),
                s.return_({"n": Steps["work"]}),
            ],
            register=False,
        ),
        # One call at a time to an account's API, and five across all tenants.
        _account_and_global("one-call", 5, "provider"),
        # One call at a time per account and one in all: both keys queue at once.
        _account_and_global("tight-pair", 1, "tight"),
        # Two calls at a time per account (a step's own limit, no workflow limit).
        define_workflow(
            name="two-calls",
            trigger=on_event("two-calls.go"),
            idempotency_key=Event.payload["n"],
            steps=lambda s: [
                s.task("call", _echo, concurrency=Concurrency(2, key=Event.payload["account"])),
                s.return_({"n": Steps["call"]}),
            ],
            register=False,
        ),
        # One call at a time per account; a run's priority= from its trigger event.
        define_workflow(
            name="prio-call",
            trigger=on_event("prio-call.go"),
            idempotency_key=Event.payload["n"],
            priority=Event.payload["prio"],
            steps=lambda s: [
                s.task("call", _echo, concurrency=Concurrency(1, key=Event.payload["account"])),
                s.return_({"n": Steps["call"]}),
            ],
            register=False,
        ),
        # Up to three triggers per account in one run, or what came within a minute.
        define_workflow(
            name="batched",
            trigger=on_event("batched.go"),
            batch=Batch(3, "PT1M", key=Event.payload["account"]),
            steps=lambda s: [
                s.compute("ns", _batch_ns),
                s.task("seen", _batch_ns),
                s.return_({"ns": Steps["ns"], "task": Steps["seen"]}),
            ],
            register=False,
        ),
        # Ten starts a minute per account.
        define_workflow(
            name="throttled",
            trigger=on_event("throttled.go"),
            idempotency_key=Event.payload["n"],
            throttle=Throttle(10, "PT1M", key=Event.payload["account"]),
            steps=lambda s: [s.return_({"n": Event.payload["n"]})],
            register=False,
        ),
        # Two attempts a second, a burst of two.
        define_workflow(
            name="throttled-task",
            trigger=on_event("throttled-task.go"),
            idempotency_key=Event.payload["n"],
            steps=lambda s: [
                s.task("call", _echo, throttle=Throttle(2, "PT1S", burst=2)),
                s.return_({"n": Steps["call"]}),
            ],
            register=False,
        ),
        define_workflow(
            name="rate-limited",
            trigger=on_event("rate-limited.go"),
            idempotency_key=Event.payload["n"],
            rate_limit=RateLimit(3, "PT1H", key=Event.payload["account"]),
            steps=lambda s: [s.return_({"n": Event.payload["n"]})],
            register=False,
        ),
        define_workflow(
            name="singleton-skip",
            trigger=on_event("singleton-skip.go"),
            idempotency_key=Event.payload["n"],
            singleton=Singleton(Event.payload["account"]),
            steps=lambda s: [s.wait(for_="PT1H"), s.return_({"n": Event.payload["n"]})],
            register=False,
        ),
        define_workflow(
            name="singleton-cancel",
            trigger=on_event("singleton-cancel.go"),
            idempotency_key=Event.payload["n"],
            singleton=Singleton(Event.payload["account"], mode="cancel"),
            steps=lambda s: [s.wait(for_="PT1H"), s.return_({"n": Event.payload["n"]})],
            register=False,
        ),
        define_workflow(
            name="debounced",
            trigger=on_event("debounced.go"),
            debounce=Debounce("PT5M", key=Event.payload["account"], timeout="PT20M"),
            steps=lambda s: [s.return_({"n": Event.payload["n"]})],
            register=False,
        ),
    ]
    for definition in definitions:
        registry.register(definition)
    return registry


REGISTRY = _registry()


def put(
    store: Store,
    workflow: str,
    n: int,
    now: datetime = T0,
    tenant: str = TENANT_A,
    **payload: Any,
) -> list[str]:
    """Ingest one trigger event of `workflow` (payload n, account "a-1" unless given);
    the run ids it started."""
    payload = {"n": n, "account": "a-1", **payload}
    event = DomainEvent(
        id=f"{workflow}-{tenant[:4]}-{n}",
        type=f"{workflow}.go",
        payload=payload,
        tenant_id=tenant,
        time=now,
    )
    result = ingest_domain_event(store, event, now, REGISTRY)
    return [outcome.run_id for outcome in result.started]


def run_of(workflow: str, n: int) -> str:
    return run_id_for(workflow, str(n))


def resume(
    store: Store, run_id: str, step_index: int, now: datetime, tenant: str = TENANT_A
) -> ResumeResult:
    return resume_run(store, tenant, run_id, step_index, now, registry=REGISTRY)


def status(store: Store, run_id: str, tenant: str = TENANT_A) -> str:
    return load_run(store, tenant, run_id).status


def ports() -> TaskPorts:
    return task_ports(REGISTRY)


def run_one_task(store: Store, now: datetime) -> TaskAttemptResult | None:
    """The worker's next attempt, run to its outcome (None: nothing admitted)."""
    return run_task(store, ports(), lambda: now, lambda: 600.0, random.Random(1))


def claim(store: Store, now: datetime) -> ClaimedTask | None:
    """A worker's claim that stops before the attempt runs (a worker that dies right
    after it): the task leased, its slots with it."""
    return claim_within_limits(
        store, lambda: store.tasks.claim(now, 600_000, 10_000, 5.0), lambda: now
    )


def look(store: Store, now: datetime) -> list[Any]:
    """The look after a commit (wake), as the stages run it."""
    return wake_after_commit(store, now)


def pending_row(store: Store, run_id: str) -> dict[str, Any] | None:
    row: dict[str, Any] | None = store.conn.execute(
        "SELECT step_index, wake_at, leased_until FROM workflow_run_pending WHERE run_id = %s",
        (run_id,),
    ).fetchone()
    return row


def waiters(store: Store) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = store.conn.execute(
        "SELECT flow_key, work, run_id::text AS run_id, woken_at FROM flow_waiters ORDER BY seq"
    ).fetchall()
    return rows


def task_rows(store: Store) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = store.conn.execute(
        "SELECT run_id::text AS run_id, status, attempts, next_attempt_at, flow_ticket "
        "FROM task_queue ORDER BY created_at, run_id"
    ).fetchall()
    return rows


def project(store: Store, now: datetime) -> None:
    from workflow_runner.engine.projection import project_pending

    project_pending(store, now)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


Operation = Callable[[Store], Any]


def settle(store: Store, now: datetime, tenant: str = TENANT_A) -> None:
    """Run everything there is to run at `now`, as the projection, the worker, the looks
    after commits and the resumes would, until nothing moves."""
    for _ in range(50):
        moved = 0
        project(store, now)
        while (attempt := run_one_task(store, now)) is not None:
            moved += 1
            del attempt
        look(store, now)
        project(store, now)
        for row in store.runs.for_tenant(tenant, limit=1000):
            if row.status != "waiting":
                continue
            state = load_run(store, tenant, row.run_id)
            suspension = state.suspension
            assert suspension is not None
            pending = pending_row(store, row.run_id)
            parked = pending is not None and pending["wake_at"] > now
            if (suspension.due_at <= now or state.outcome_ready) and not parked:
                result = resume(store, row.run_id, suspension.step_index, now, tenant)
                moved += result.outcome in ("suspended", "completed", "failed")
        if not moved:
            return
    raise AssertionError("the runs did not come to rest")


def held_run(store: Store) -> str:
    """Account a-1 with both slots leased to running tasks and a third run queued."""
    for n in (1, 2):
        put(store, "per-account", n)
    project(store, at(60))
    for n in (1, 2):
        resume(store, run_of("per-account", n), 0, at(60))
    project(store, at(60))
    assert claim(store, at(61)) is not None and claim(store, at(61)) is not None
    put(store, "per-account", 3)
    project(store, at(61))
    assert resume(store, run_of("per-account", 3), 0, at(61)).reason == "held_by_limit"
    return run_of("per-account", 3)
