"""The sample scenario every fault test replays: all five sample workflows, two tenants
sharing run ids, an awaited event that matches and one that never comes, retries with
backoff, mail and webhooks, cron runs; ten days of business time."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from workflow_runner.clock import ManualClock
from workflow_runner.definition import WorkflowRegistry

from tests.reliability.harness import TENANT_A, TENANT_B, Driver, FaultPlan, eventbridge

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
END = START + timedelta(days=10)


def inputs() -> list[tuple[timedelta, str, dict[str, object]]]:
    """(offset from START, target function, EventBridge event) in delivery order."""
    signed_up = [
        eventbridge(
            "user.signed-up",
            {"tenantId": t, "userId": u, "email": f"{u}.{t[:2]}@example.com"},
            event_id=f"ev-signup-{t[:2]}-{u}",
        )
        for t, u in ((TENANT_A, "active-1"), (TENANT_A, "quiet-2"), (TENANT_B, "active-1"))
    ]
    orders = [
        eventbridge(
            "order.placed",
            {"tenantId": t, "orderId": "o-1", "total": 10, "email": f"buyer.{t[:2]}@example.com"},
            event_id=f"ev-order-{t[:2]}",
        )
        for t in (TENANT_A, TENANT_B)
    ]
    inventory = eventbridge(
        "inventory.changed",
        {"tenantId": TENANT_A, "sku": "sku-1", "revision": 1, "failAttempts": 2},
        event_id="ev-inventory",
    )
    data = eventbridge(
        "data.processed",
        {"tenantId": TENANT_B, "webhookUrl": "https://hooks.example.com/data", "data": {"n": 1}},
        event_id="ev-data",
    )
    approval = eventbridge(
        "order.approved",
        {"tenantId": TENANT_A, "orderId": "o-1", "approver": "ann"},
        event_id="ev-approval",
    )
    stray = eventbridge(  # matches no wait: tenant B's order must time out
        "order.approved",
        {"tenantId": TENANT_B, "orderId": "o-2", "approver": "bob"},
        event_id="ev-stray",
    )
    zero = timedelta(0)
    out: list[tuple[timedelta, str, dict[str, object]]] = [
        (zero, "trigger_projection", e) for e in (*signed_up, *orders, inventory)
    ]
    out.append((timedelta(minutes=5), "trigger_projection", data))
    out.append((timedelta(hours=1), "event_wakeup", approval))
    out.append((timedelta(hours=2), "event_wakeup", stray))
    return out


def play(
    db_url: str,
    registry: WorkflowRegistry,
    plan: FaultPlan | None = None,
    copies: int = 1,
    seed: int | None = None,
    duplicate: float = 0.0,
) -> Driver:
    """Replay the scenario (optionally each input `copies` times, shuffled) to END."""
    clock = ManualClock(START)
    driver = Driver(db_url, registry, clock, plan)
    rng = random.Random(seed) if seed is not None else None
    by_offset: dict[timedelta, list[tuple[str, dict[str, object]]]] = {}
    for offset, target, event in inputs():
        by_offset.setdefault(offset, []).append((target, event))
    for offset in sorted(by_offset):
        driver.run_until(START + offset, rng, duplicate)
        for target, event in by_offset[offset]:
            n = copies if rng is None else rng.randint(1, copies)
            driver.send(target, event, n)
        driver.tick(rng, duplicate)
    driver.run_until(END, rng, duplicate)
    driver.recover()
    return driver
