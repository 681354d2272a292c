"""The per-tenant cap on runs in flight (TENANT_MAX_IN_FLIGHT) on real PostgreSQL: it
holds while scans run concurrently, it counts timers sent ahead, and a capped tenant's
backlog still drains completely, each run resumed once."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import timedelta

from workflow_runner import ManualClock, define_workflow, on_event
from workflow_runner.aws.inprocess import InMemoryResumeQueue
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine import ResumeRequestItem, project_pending, resume_runs
from workflow_runner.engine.due_scan import DueScanResult, due_scan
from workflow_runner.ports import ResumeRequest
from workflow_runner.store import Store, connect

from tests.support import TENANT_A, TENANT_B, trigger

CAP = 5


class SharedQueue(InMemoryResumeQueue):
    """The in-memory resume queue, safe for scans on several threads."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self._lock = threading.Lock()

    def send(self, requests: Sequence[ResumeRequest]) -> list[ResumeRequest]:
        with self._lock:
            return super().send(requests)

    def receive(self, limit: int = 10) -> list[ResumeRequest]:
        with self._lock:
            return super().receive(limit)


def napping(registry: WorkflowRegistry) -> WorkflowRegistry:
    registry.register(
        define_workflow(
            name="napping",
            trigger=on_event("nap.go"),
            idempotency_key=lambda e: e.payload["k"],
            steps=lambda s: [s.wait(for_=lambda ctx: ctx.event.payload["wait"]), s.return_(None)],
            register=False,
        )
    )
    return registry


def start(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, tenant: str, n: int, wait: str
) -> list[str]:
    started = []
    for i in range(n):
        payload = {"k": f"{tenant[:4]}-{i}", "wait": wait}
        result = trigger(store, registry, "nap.go", payload, clock.now(), tenant)
        started.append(result.started[0].run_id)
    return started


def in_flight(store: Store, tenant: str, clock: ManualClock) -> int:
    return store.pending.in_flight(tenant, clock.now(), 0, 1000).total


def concurrent_scans(
    db_url: str, queue: SharedQueue, registry: WorkflowRegistry, clock: ManualClock, n: int
) -> list[DueScanResult]:
    """n scans at once, each on its own connection, released together."""
    barrier = threading.Barrier(n)
    results: list[DueScanResult | BaseException] = [RuntimeError("did not run")] * n

    def scan(i: int) -> None:
        own = connect(db_url)
        try:
            barrier.wait()
            results[i] = due_scan(
                own,
                queue,
                clock.now(),
                batch=2,
                registry=registry,
                tenant_queue_seconds=0,
                tenant_max_in_flight=CAP,
            )
        except BaseException as error:
            results[i] = error
        finally:
            own.close()

    threads = [threading.Thread(target=scan, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return [r for r in results if isinstance(r, DueScanResult)]


def test_the_cap_holds_under_concurrent_scans_and_a_capped_backlog_drains(
    store: Store, db_url: str, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    napping(registry)
    runs_a = start(store, registry, clock, TENANT_A, 40, "PT1S")
    runs_b = start(store, registry, clock, TENANT_B, 4, "PT1S")
    project_pending(store, clock.now())
    clock.advance(timedelta(minutes=1))
    queue = SharedQueue(clock)
    completed: list[tuple[str, str]] = []
    capped_seen = False
    for _ in range(60):
        results = concurrent_scans(db_url, queue, registry, clock, 3)
        capped_seen |= any(r.capped_tenants for r in results)
        # Rows held back by the operator's cap are not a backlog the consumers missed.
        assert all(r.drained for r in results)
        for tenant in (TENANT_A, TENANT_B):
            assert in_flight(store, tenant, clock) <= CAP, tenant
        requests = queue.receive(3)
        items = [ResumeRequestItem(r.tenant_id, r.run_id, r.step_index) for r in requests]
        for request, result in zip(
            requests, resume_runs(store, items, clock.now(), registry), strict=True
        ):
            assert getattr(result, "outcome", None) == "completed", result
            completed.append((request.tenant_id, request.run_id))
        project_pending(store, clock.now())
        if len(completed) == 44:
            break
    assert capped_seen
    assert sorted(completed) == sorted(
        [(TENANT_A, r) for r in runs_a] + [(TENANT_B, r) for r in runs_b]
    )  # every run once: nothing lost, nothing resumed twice
    assert store.pending.for_tenant(TENANT_A) == [] and len(queue) == 0


def test_timers_sent_ahead_count_towards_the_cap(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    napping(registry)
    start(store, registry, clock, TENANT_A, 3, "PT30S")
    project_pending(store, clock.now())
    queue = InMemoryResumeQueue(clock)
    result = due_scan(
        store, queue, clock.now(), horizon_seconds=60, registry=registry, tenant_max_in_flight=2
    )
    assert [r.delay_seconds for r in queue.sent] == [30, 30]  # the third waits for room
    assert (result.capped_tenants, result.held_tenants, result.drained) == (1, 0, True)
    assert in_flight(store, TENANT_A, clock) == 2
    # Without a cap all three go ahead, delayed to their second.
    uncapped = due_scan(store, queue, clock.now(), horizon_seconds=60, registry=registry)
    assert uncapped.leased == 1 and len(queue.sent) == 3
