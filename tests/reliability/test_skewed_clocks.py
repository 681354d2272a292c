"""Skewed clocks (issue 11, item 1): every function invocation runs on its own clock,
off by up to ±5 s from the EventBridge times, and each approval reaches EventWakeup
before its order reaches TriggerProjection about as often as after it, or in the same
round before the projection ran. Every approval emitted after its order wakes the run
(through the wakeup or through the look-back); an approval emitted before its order
never does, and that run times out. The old comparison of the two functions' clocks
lost the first kind and took the second kind at random."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from workflow_runner import run_id_for
from workflow_runner.clock import ManualClock
from workflow_runner.definition import WorkflowRegistry

from tests.reliability.harness import TENANT_A, Driver, check_invariants, eventbridge, record
from tests.reliability.scenario import START

SKEW_MS = 5000


class SkewedClock:
    """The driver's business clock seen through one function's skewed clock."""

    def __init__(self, base: ManualClock) -> None:
        self.base = base
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return self.base.now() + self.offset


def _play(db_url: str, samples: WorkflowRegistry, orders: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    base = ManualClock(START)
    driver = Driver(db_url, samples, base)
    skewed = SkewedClock(base)
    driver.rt.clock = skewed
    delivered: list[str] = []
    invoke = driver.invoke

    def skewed_invoke(name: str, event: Any) -> Any:
        skewed.offset = timedelta(milliseconds=rng.randint(-SKEW_MS, SKEW_MS))
        if isinstance(event, dict) and "id" in event:
            delivered.append(str(event["id"]))
        return invoke(name, event)

    driver.invoke = skewed_invoke  # type: ignore[method-assign]
    rounds: dict[int, list[tuple[str, dict[str, Any]]]] = {}
    expected: dict[str, bool] = {}
    for i in range(orders):
        order = f"skew-{seed}-{i}"
        placed_round = 1 + i // 5
        placed_at = START + timedelta(seconds=placed_round * 10 + rng.randint(0, 3))
        stale = rng.random() < 0.2  # approved before the order was placed: must not count
        approved_at = placed_at + (
            timedelta(seconds=-2) if stale else timedelta(milliseconds=rng.randint(0, 1500))
        )
        expected[order] = not stale
        detail = {"tenantId": TENANT_A, "orderId": order, "total": 10, "email": "b@example.com"}
        placed = eventbridge("order.placed", detail, f"placed-{order}", placed_at)
        approved = eventbridge(
            "order.approved", {**detail, "approver": "ann"}, f"approved-{order}", approved_at
        )
        rounds.setdefault(placed_round, []).append(("trigger_projection", placed))
        approved_round = max(0, placed_round + rng.choice((-1, 0, 0, 1)))
        rounds.setdefault(approved_round, []).append(("event_wakeup", approved))
    try:
        for r in sorted(rounds):
            base.set(START + timedelta(seconds=r * 10 + 5))
            for target, event in rounds[r]:
                driver.send(target, event)
            driver.tick(rng)
        driver.run_until(START + timedelta(days=4))
        driver.recover()
        assert check_invariants(driver.monitor, samples) == []
        outcome = {}
        for order in expected:
            row = driver.monitor.runs.get(TENANT_A, run_id_for("order-approval", order))
            assert row is not None, order
            outcome[order] = row.status == "completed"
        wrong = {o: e for o, e in expected.items() if outcome[o] != e}
        assert wrong == {}, f"{len(wrong)} runs took the wrong branch: {sorted(wrong)[:5]}"
        early = sum(
            1
            for order in expected
            if delivered.index(f"approved-{order}") < delivered.index(f"placed-{order}")
        )
        return {"orders": orders, "early": early, "stale": sum(not e for e in expected.values())}
    finally:
        driver.close()


def _check(fresh_db: Callable[[], str], samples: WorkflowRegistry, seeds: range, n: int) -> None:
    total = early = 0
    for seed in seeds:
        figures = _play(fresh_db(), samples, n, seed)
        total += figures["orders"]
        early += figures["early"]
    record(skewed_awaited=total, awaited_before_trigger=early, runs_driven=total)


def test_skewed_clocks_and_early_approvals_wake_exactly_the_runs_they_should(
    fresh_db: Callable[[], str], samples: WorkflowRegistry
) -> None:
    _check(fresh_db, samples, range(2), 25)


@pytest.mark.soak
def test_skewed_clocks_soak(fresh_db: Callable[[], str], samples: WorkflowRegistry) -> None:
    _check(fresh_db, samples, range(2, 12), 60)
