"""The due scan: leasing, delays to the second, batches without a cap, the budget,
refused requests, fairness between tenants, and cron runs exactly once per scheduled
instant."""

from __future__ import annotations

import importlib
import itertools
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from workflow_runner import DomainEvent, ManualClock, define_workflow, on_cron, on_event
from workflow_runner.aws.inprocess import InMemoryResumeQueue
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine import (
    ResumeRequestItem,
    WokenRun,
    ingest_domain_event,
    project_pending,
    resume_runs,
)
from workflow_runner.engine.due_scan import due_scan
from workflow_runner.engine.enqueue import delay_for, enqueue_due
from workflow_runner.store import Store

from tests.support import TENANT_A as A
from tests.support import TENANT_B as B

# The module (the package exports its function under the same name).
due_scan_module = importlib.import_module("workflow_runner.engine.due_scan")


@pytest.fixture
def sleepy(registry: WorkflowRegistry) -> WorkflowRegistry:
    registry.register(
        define_workflow(
            name="sleepy",
            trigger=on_event("nap.requested"),
            steps=lambda s: [s.wait(for_=lambda ctx: ctx.event.payload["wait"]), s.return_(None)],
            register=False,
        )
    )
    return registry


def nap(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, wait: str, tenant: str = A
) -> str:
    event = DomainEvent(
        str(uuid.uuid4()), "nap.requested", {"wait": wait}, tenant, clock.now(), "t"
    )
    (outcome,) = ingest_domain_event(store, event, clock.now(), registry).started
    return outcome.run_id


def pending(store: Store, tenant: str = A) -> dict[str, dict[str, Any]]:
    return {r.run_id: r for r in store.pending.for_tenant(tenant)}


def test_delay_rounds_up_and_clamps() -> None:
    now = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    assert delay_for(now + timedelta(seconds=10.2), now) == 11
    assert delay_for(now - timedelta(hours=1), now) == 0
    assert delay_for(now + timedelta(hours=1), now) == 900


def test_rows_due_within_the_horizon_are_leased_and_delayed_to_the_second(
    store: Store, sleepy: WorkflowRegistry, clock: ManualClock
) -> None:
    soon = nap(store, sleepy, clock, "PT10S")
    later = nap(store, sleepy, clock, "PT45S")
    beyond = nap(store, sleepy, clock, "PT5M")
    project_pending(store, clock.now())
    queue = InMemoryResumeQueue(clock)

    result = due_scan(store, queue, clock.now(), horizon_seconds=60, registry=sleepy)

    assert {(r.run_id, r.delay_seconds) for r in queue.sent} == {(soon, 10), (later, 45)}
    assert (result.tenants, result.leased, result.enqueued, result.drained) == (1, 2, 2, True)
    rows = pending(store)
    # Business time advances with the scan's own (real) duration: allow for it.
    lease_end = clock.now() + timedelta(seconds=1200)
    assert lease_end <= rows[soon].leased_until < lease_end + timedelta(seconds=5)
    assert rows[beyond].leased_until is None
    # A row in flight is not handed out again...
    assert due_scan(store, queue, clock.now(), registry=sleepy).leased == 0
    # ...until its lease ends (the message was lost or failed for good).
    clock.advance(timedelta(seconds=1201))
    again = due_scan(store, queue, clock.now(), registry=sleepy)
    assert again.leased == 3
    assert {r.delay_seconds for r in queue.sent[2:]} == {0}


def test_overdue_rows_go_without_delay_and_report_their_lag(
    store: Store, sleepy: WorkflowRegistry, clock: ManualClock
) -> None:
    nap(store, sleepy, clock, "PT1M")
    project_pending(store, clock.now())
    clock.advance(timedelta(minutes=3))
    queue = InMemoryResumeQueue(clock)
    result = due_scan(store, queue, clock.now(), registry=sleepy)
    assert [r.delay_seconds for r in queue.sent] == [0]
    assert result.max_lag_seconds == pytest.approx(120, abs=1)


def test_refused_requests_release_their_lease(
    store: Store, sleepy: WorkflowRegistry, clock: ManualClock
) -> None:
    refused_run = nap(store, sleepy, clock, "PT1S")
    ok_run = nap(store, sleepy, clock, "PT2S")
    project_pending(store, clock.now())
    queue = InMemoryResumeQueue(clock, refuse=lambda r: r.run_id == refused_run)
    result = due_scan(store, queue, clock.now(), registry=sleepy)
    assert (result.enqueued, result.refused, result.drained) == (1, 1, False)
    rows = pending(store)
    assert rows[refused_run].leased_until is None
    assert rows[ok_run].leased_until is not None
    # The next scan offers the released row again.
    retry = InMemoryResumeQueue(clock)
    assert due_scan(store, retry, clock.now(), registry=sleepy).leased == 1
    assert [r.run_id for r in retry.sent] == [refused_run]


def test_backlog_drains_in_batches_round_robin_across_tenants(
    store: Store, sleepy: WorkflowRegistry, clock: ManualClock
) -> None:
    runs_a = [nap(store, sleepy, clock, f"PT{i}S", A) for i in range(1, 6)]
    run_b = nap(store, sleepy, clock, "PT3S", B)
    project_pending(store, clock.now())
    clock.advance(timedelta(minutes=1))
    queue = InMemoryResumeQueue(clock)
    result = due_scan(store, queue, clock.now(), batch=2, registry=sleepy)
    assert result.leased == 6 and result.drained
    assert result.batches == 4  # A(2) B(1) A(2) A(1): no per-tick cap
    order = [(r.tenant_id, r.run_id) for r in queue.sent]
    assert order == [
        (A, runs_a[0]),
        (A, runs_a[1]),
        (B, run_b),
        (A, runs_a[2]),
        (A, runs_a[3]),
        (A, runs_a[4]),
    ]


# --- fairness between tenants -------------------------------------------------------


def consume(
    store: Store, queue: InMemoryResumeQueue, registry: WorkflowRegistry, clock: ManualClock, n: int
) -> list[tuple[str, str]]:
    """ResumeRun: resume the next `n` visible requests, first in first out; the
    (tenant, run) of each that completed."""
    requests = queue.receive(n)
    items = [ResumeRequestItem(r.tenant_id, r.run_id, r.step_index) for r in requests]
    results = resume_runs(store, items, clock.now(), registry)
    return [
        (r.tenant_id, r.run_id)
        for r, res in zip(requests, results, strict=True)
        if getattr(res, "outcome", None) == "completed"
    ]


def completions(store: Store, tenant: str, run_id: str) -> int:
    return sum(e.type == "workflow.run-completed" for e in store.streams.load(tenant, run_id))


def test_a_tenant_whose_run_falls_due_during_a_long_scan_joins_the_next_round(
    store: Store, sleepy: WorkflowRegistry, clock: ManualClock
) -> None:
    for _ in range(8):
        nap(store, sleepy, clock, "PT1S", A)
    run_b = nap(store, sleepy, clock, "PT1M", B)
    project_pending(store, clock.now())
    clock.advance(timedelta(seconds=59))  # A's backlog is due; B's run in a second
    ticks = itertools.count()
    queue = InMemoryResumeQueue(clock)
    # Each monotonic() call is 0.1 s later: B's run falls due while A's backlog goes out
    # one row per round.
    due_scan(
        store,
        queue,
        clock.now(),
        horizon_seconds=0,
        batch=1,
        registry=sleepy,
        monotonic=lambda: next(ticks) / 10,
        tenant_queue_seconds=0,
    )
    order = [(r.tenant_id, r.run_id) for r in queue.sent]
    assert (B, run_b) in order, "B waited for the next scan"
    assert order.index((B, run_b)) < len(order) - 2  # served between A's rounds
    assert len(order) == 9


def test_a_backlog_never_sits_in_the_queue_ahead_of_another_tenants_run(
    store: Store, sleepy: WorkflowRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(due_scan_module, "TENANT_SHARE_UNMEASURED", 4)
    runs_a = [nap(store, sleepy, clock, "PT1S", A) for _ in range(12)]
    project_pending(store, clock.now())
    clock.advance(timedelta(minutes=1))
    queue = InMemoryResumeQueue(clock)
    first = due_scan(store, queue, clock.now(), registry=sleepy)
    assert [r.tenant_id for r in queue.sent] == [A] * 4  # A's share, not its backlog
    # Held to its share by consumers that are behind: a backlog, not drained.
    assert (first.held_tenants, first.drained) == (1, False)

    run_b = nap(store, sleepy, clock, "PT1S", B)
    project_pending(store, clock.now())
    clock.advance(timedelta(seconds=2))
    second = due_scan(store, queue, clock.now(), registry=sleepy)
    assert second.leased == 1  # B's run; A has no room until its requests are resumed
    order = [(r.tenant_id, r.run_id) for r in queue.sent]
    assert order.index((B, run_b)) == 4  # behind 4 of A's requests, not 12

    # Drain: consumers resume what is queued, the scan tops A up, all runs end once.
    done: list[tuple[str, str]] = []
    for _ in range(20):
        done += consume(store, queue, sleepy, clock, 3)
        project_pending(store, clock.now())
        due_scan(store, queue, clock.now(), registry=sleepy)
        in_flight = store.pending.in_flight(A, clock.now(), 100, 100)
        assert in_flight.due <= 4
        if len(done) == 13:
            break
    assert sorted(done) == sorted([(A, r) for r in runs_a] + [(B, run_b)])
    assert all(completions(store, A, r) == 1 for r in runs_a)
    assert store.pending.for_tenant(A) == []


def test_the_share_bounds_due_rows_only_timers_sent_ahead_all_go(
    store: Store, sleepy: WorkflowRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(due_scan_module, "TENANT_SHARE_UNMEASURED", 4)
    for i in range(10):
        nap(store, sleepy, clock, f"PT{20 + i}S")
    project_pending(store, clock.now())
    queue = InMemoryResumeQueue(clock)
    result = due_scan(store, queue, clock.now(), horizon_seconds=60, batch=3, registry=sleepy)
    # Nothing is due yet: the queue shows its consumers none of them before their second.
    assert sorted(r.delay_seconds for r in queue.sent) == list(range(20, 30))
    assert (result.held_tenants, result.drained) == (0, True)


def _due_naps_of_a(
    store: Store,
    sleepy: WorkflowRegistry,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    runs: int,
    unmeasured: int,
) -> list[str]:
    """`runs` of A's naps, projected and due a minute ago, with the unmeasured share
    `unmeasured` and a floor of 5; their run ids."""
    monkeypatch.setattr(due_scan_module, "TENANT_SHARE_UNMEASURED", unmeasured)
    monkeypatch.setattr(due_scan_module, "TENANT_SHARE_FLOOR", 5)
    run_ids = [nap(store, sleepy, clock, "PT1S", A) for _ in range(runs)]
    project_pending(store, clock.now())
    clock.advance(timedelta(minutes=1))
    return run_ids


def _scan_waiting_for_room(
    store: Store,
    sleepy: WorkflowRegistry,
    clock: ManualClock,
    batch: int,
    consume_in_pause: Callable[[int], int],
) -> tuple[Any, list[int], list[tuple[str, str]]]:
    """One due scan over A's due runs that waits for room (as DueScan is deployed), on a
    clock only its pauses move; in each pause ResumeRun consumes what
    `consume_in_pause(pauses so far)` says. Returns the scan's result, A's rows in
    flight at each pause, and every run resumed, the rest consumed after the scan."""
    queue = InMemoryResumeQueue(clock)
    elapsed = [0.0]
    done: list[tuple[str, str]] = []
    seen_in_flight: list[int] = []

    def pause(seconds: float) -> None:
        seen_in_flight.append(store.pending.in_flight(A, clock.now(), 1000, 0).due)
        elapsed[0] += seconds
        clock.advance(timedelta(seconds=seconds))
        taken = consume_in_pause(len(seen_in_flight))
        if taken:
            done.extend(consume(store, queue, sleepy, clock, taken))

    result = due_scan(
        store,
        queue,
        clock.now(),
        horizon_seconds=0,
        batch=batch,
        registry=sleepy,
        monotonic=lambda: elapsed[0],
        tenant_queue_seconds=0.5,
        wait_for_room=True,
        sleep=pause,
    )
    while queue.next_visible_at() is not None:
        done.extend(consume(store, queue, sleepy, clock, batch))
    return result, seen_in_flight, done


def test_a_tenants_share_follows_the_rate_its_runs_are_resumed_at(
    store: Store, sleepy: WorkflowRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs_a = _due_naps_of_a(store, sleepy, clock, monkeypatch, runs=100, unmeasured=40)

    # The scan waits for room while ResumeRun consumes: 4 runs per 0.1 s (40/s), so half
    # a second of A's resumes is 20 runs in flight.
    result, seen_in_flight, done = _scan_waiting_for_room(
        store, sleepy, clock, 10, lambda _pauses: 4
    )
    assert seen_in_flight[0] == 40  # before any measurement: the unmeasured share
    settled = seen_in_flight[seen_in_flight.index(20) :]
    assert settled and max(settled) <= 20  # then what A's consumers resume in 0.5 s
    assert result.leased == 100 and result.drained
    assert sorted(done) == sorted((A, r) for r in runs_a)


def test_a_share_rises_at_once_to_what_consumers_that_ran_dry_resumed(
    store: Store, sleepy: WorkflowRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Consumers that start late (a cold start: nothing resumed in the first pause)
    measure a rate of 0; once they resume all in flight and wait for more, that many in
    the pause is a rate they are at least as fast as, and the share follows it at once
    instead of climbing by the smoothing's tenth a pause from 0."""
    runs_a = _due_naps_of_a(store, sleepy, clock, monkeypatch, runs=300, unmeasured=20)

    # Cold in the first pause, then they take all there is.
    result, seen_in_flight, done = _scan_waiting_for_room(
        store, sleepy, clock, 100, lambda pauses: 1000 if pauses > 1 else 0
    )
    # 20 in flight through the cold pause; all 20 resumed in the next 0.1 s (200/s) make
    # the share 100, half a second of them (smoothed from 0 it was 9).
    assert seen_in_flight[:3] == [20, 20, 100]
    assert result.leased == 300 and result.drained
    assert sorted(done) == sorted((A, r) for r in runs_a)


def test_budget_ends_the_scan_with_rows_left(
    store: Store, sleepy: WorkflowRegistry, clock: ManualClock
) -> None:
    for i in range(5):
        nap(store, sleepy, clock, f"PT{i + 1}S")
    project_pending(store, clock.now())
    clock.advance(timedelta(minutes=1))
    ticks = itertools.count()
    queue = InMemoryResumeQueue(clock)
    # Each monotonic() call is one second later; a 6 s budget allows a couple of batches.
    result = due_scan(
        store,
        queue,
        clock.now(),
        budget_seconds=6,
        batch=1,
        registry=sleepy,
        monotonic=lambda: float(next(ticks)),
    )
    assert result.drained is False
    assert 0 < result.leased < 5
    assert len(queue.sent) == result.leased


def test_enqueue_woken_leases_so_the_scan_does_not_send_again(
    store: Store, sleepy: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = nap(store, sleepy, clock, "PT0S")
    project_pending(store, clock.now())
    queue = InMemoryResumeQueue(clock)
    woken = [WokenRun(A, run_id, 0, "evt", clock.now())]
    assert enqueue_due(store, queue, woken, clock.now()) == (1, 0)
    assert enqueue_due(store, queue, woken, clock.now()) == (0, 0)  # lease taken
    assert due_scan(store, queue, clock.now(), registry=sleepy).leased == 0
    assert [r.delay_seconds for r in queue.sent] == [0]


# --- cron ---------------------------------------------------------------------------


@pytest.fixture
def hourly(registry: WorkflowRegistry) -> WorkflowRegistry:
    registry.register(
        define_workflow(
            name="hourly",
            trigger=on_cron("0 * * * *"),
            steps=lambda s: [s.return_(lambda ctx: ctx.event.payload["scheduledAt"])],
            register=False,
        )
    )
    return registry


def cron_runs(store: Store, tenant: str) -> list[str]:
    return sorted(
        e.payload["cronScheduledAt"]
        for r in store.runs.for_tenant(tenant, "hourly")
        for e in store.streams.load(tenant, r.run_id)[:1]
    )


def test_cron_runs_start_once_per_instant_and_tenant(
    store: Store, hourly: WorkflowRegistry, clock: ManualClock
) -> None:
    queue = InMemoryResumeQueue(clock)
    for tenant in (A, B):
        store.inbox.register_tenant(tenant, clock.now())
    clock.set(datetime(2026, 1, 5, 9, 0, 30, tzinfo=UTC))
    first = due_scan(store, queue, clock.now(), registry=hourly)
    assert first.cron_started == [] and first.cron_checked == 2  # first sight: no backfill

    clock.set(datetime(2026, 1, 5, 10, 0, 5, tzinfo=UTC))
    second = due_scan(store, queue, clock.now(), registry=hourly)
    assert sorted(o.tenant_id for o in second.cron_started) == [A, B]
    assert all(o.outcome == "completed" for o in second.cron_started)
    assert due_scan(store, queue, clock.now(), registry=hourly).cron_started == []

    clock.set(datetime(2026, 1, 5, 13, 0, 0, tzinfo=UTC))  # the scanner was down for a while
    third = due_scan(store, queue, clock.now(), registry=hourly)
    assert len(third.cron_started) == 6
    expected = [
        "2026-01-05T10:00:00.000000Z",
        "2026-01-05T11:00:00.000000Z",
        "2026-01-05T12:00:00.000000Z",
        "2026-01-05T13:00:00.000000Z",
    ]
    assert cron_runs(store, A) == expected and cron_runs(store, B) == expected


def test_a_lost_cron_position_never_starts_an_instant_twice(
    store: Store, hourly: WorkflowRegistry, clock: ManualClock
) -> None:
    store.inbox.register_tenant(A, clock.now())
    queue = InMemoryResumeQueue(clock)
    due_scan(store, queue, clock.now(), registry=hourly)
    clock.advance(timedelta(hours=1, seconds=1))
    assert len(due_scan(store, queue, clock.now(), registry=hourly).cron_started) == 1
    # A scan that read the old position (overlapping scans, a restored row) repeats
    # the instant: the run id derives from it, so nothing starts twice.
    store.cron.advance(A, "hourly", clock.now() - timedelta(hours=1))
    assert due_scan(store, queue, clock.now(), registry=hourly).cron_started == []
    assert len(cron_runs(store, A)) == 1


def test_scan_argument_checks(store: Store, clock: ManualClock) -> None:
    queue = InMemoryResumeQueue(clock)
    with pytest.raises(ValueError, match="horizon_seconds"):
        due_scan(store, queue, clock.now(), horizon_seconds=901)
    with pytest.raises(ValueError, match="lease_seconds"):
        due_scan(store, queue, clock.now(), horizon_seconds=60, lease_seconds=60)
