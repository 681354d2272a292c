"""Broadcast wakeups under crashes (issue 11, items 5 and 6): one awaited event matches
hundreds of waiting runs, and EventWakeup dies at every statement and AWS call of its
invocation in turn, before or after it, the way a killed Lambda or a lost commit
acknowledgement would leave it. Lambda retries the invocation. Every run is woken
exactly once and completes, and the retried EventWakeup enqueues every one of them
itself: the due scan never has to send one (before, a retry found the event claimed and
sent nothing, and a crash between lease and send left rows leased for 20 minutes)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta

import psycopg
import pytest
from workflow_runner import define_workflow, on_event
from workflow_runner import stream as ev
from workflow_runner.clock import ManualClock
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.embedded import database_url

from tests.reliability.harness import (
    TENANT_A,
    Driver,
    FaultPlan,
    check_invariants,
    eventbridge,
    record,
)
from tests.reliability.scenario import START


def _watchers() -> WorkflowRegistry:
    registry = WorkflowRegistry()
    registry.register(
        define_workflow(
            name="sale-watch",
            trigger=on_event("watch.started"),
            idempotency_key=lambda e: e.payload["k"],
            awaits={"sale": "sale.started"},
            register=False,
            steps=lambda s: [
                s.wait_for_event(
                    "sale.started",
                    match={
                        "version": 1,
                        "expr": {
                            "kind": "atom",
                            "path": ["region"],
                            "op": {"kind": "eq", "value": "eu"},
                        },
                    },
                    timeout="P7D",
                ),
                s.return_(lambda ctx: {"isSuccess": True, "sale": ctx.steps["sale.started"]}),
            ],
        )
    )
    return registry


@pytest.fixture
def watching(pg_server_url: str, template_database: str) -> Iterator[Callable[[int], str]]:
    """prepare(n): a database where n runs wait for the sale, cloned for each call after
    the first (each crash point starts from the same state)."""
    made: list[str] = []
    prepared: dict[int, str] = {}

    def create(template: str) -> str:
        name = f"wfr_b_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
        made.append(name)
        return name

    def prepare(n: int) -> str:
        if n not in prepared:
            name = create(template_database)
            driver = Driver(database_url(pg_server_url, name), _watchers(), ManualClock(START))
            try:
                for i in range(n):
                    watch = eventbridge(
                        "watch.started", {"tenantId": TENANT_A, "k": f"k{i}"}, f"w{i}"
                    )
                    driver.send("trigger_projection", watch)
                driver.tick()
            finally:
                driver.close()
            prepared[n] = name
        return database_url(pg_server_url, create(prepared[n]))

    yield prepare
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        for name in made:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _sale() -> dict[str, object]:
    return eventbridge(
        "sale.started",
        {"tenantId": TENANT_A, "region": "eu"},
        "sale",
        START + timedelta(minutes=5),
    )


def _boundaries(url: str) -> int:
    """How many boundaries a clean EventWakeup invocation for the sale crosses."""
    plan = FaultPlan()
    driver = Driver(url, _watchers(), ManualClock(START + timedelta(minutes=5)), plan)
    try:
        before = plan.count
        driver.invoke("event_wakeup", _sale())
        return plan.count - before
    finally:
        driver.close()


def _crash_at(url: str, n: int, at: int, phase: str) -> bool:
    plan = FaultPlan(phase=phase)
    driver = Driver(url, _watchers(), ManualClock(START + timedelta(minutes=5)), plan)
    scanned: list[int] = []
    invoke = driver.invoke

    def watching_the_scan(name: str, event: object) -> object:
        result = invoke(name, event)
        if name == "due_scan":
            scanned.append(int(result["enqueued"]))  # type: ignore[index]
        return result

    driver.invoke = watching_the_scan  # type: ignore[method-assign]
    try:
        plan.at = plan.count + at
        driver.send("event_wakeup", _sale())
        driver.tick()
        assert sum(scanned) == 0, f"{phase} {at}: the due scan had to send {sum(scanned)}"
        driver.recover()
        assert check_invariants(driver.monitor, _watchers()) == []
        rows = driver.monitor.conn.execute(
            "SELECT stream_id, count(*) AS n FROM wf_events WHERE type = %s"
            " AND payload->>'eventId' = 'sale' GROUP BY stream_id",
            (ev.STEP_EVENT_MATCHED,),
        ).fetchall()
        assert len(rows) == n and {r["n"] for r in rows} == {1}, f"{phase} {at}: {plan.fired}"
        done = driver.monitor.conn.execute(
            "SELECT count(*) AS n FROM workflow_runs WHERE status = 'completed'"
        ).fetchone()
        assert done == {"n": n}, f"{phase} {at}: {plan.fired}"
        return plan.fired is not None
    finally:
        driver.close()


def _check(watching: Callable[[int], str], n: int, points: list[int] | None) -> None:
    count = _boundaries(watching(n))
    crashes = {"before": 0, "after": 0}
    for at in points or list(range(1, count + 1)):
        for phase in crashes:
            crashes[phase] += _crash_at(watching(n), n, at, phase)
    total = sum(crashes.values())
    assert crashes["after"] > 0 and crashes["before"] > 0
    record(
        broadcast_woken=n * total,
        broadcast_crashes=total,
        # A crash right after a statement or call took effect: the commit happened (the
        # message was sent) but the function never heard (item 6, an ambiguous commit).
        broadcast_lost_acks=crashes["after"],
        runs_driven=n * total,
    )


def test_a_broadcast_wakeup_survives_crashes_at_its_boundaries(
    watching: Callable[[int], str],
) -> None:
    _check(watching, 120, [2, 5, 7])


@pytest.mark.soak
def test_a_broadcast_wakeup_survives_a_crash_at_every_boundary(
    watching: Callable[[int], str],
) -> None:
    _check(watching, 1200, None)
