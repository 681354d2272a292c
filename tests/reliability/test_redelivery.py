"""At-least-once and out-of-order delivery: every EventBridge input delivered one to
three times in shuffled order, and resume messages duplicated and shuffled, end in the
same state as exactly-once delivery in order."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from workflow_runner.definition import WorkflowRegistry

from tests.reliability.harness import check_invariants, delivered_effects, histories, record
from tests.reliability.scenario import play


def _compare(fresh_db: Callable[[], str], samples: WorkflowRegistry, seeds: range) -> None:
    base = play(fresh_db(), samples)
    try:
        expected, effects = histories(base.monitor), set(delivered_effects(base))
    finally:
        base.close()
    duplicates = 0
    for seed in seeds:
        driver = play(fresh_db(), samples, copies=3, seed=seed, duplicate=0.5)
        try:
            assert check_invariants(driver.monitor, samples) == [], f"seed {seed}"
            assert histories(driver.monitor) == expected, f"seed {seed}"
            assert set(delivered_effects(driver)) == effects, f"seed {seed}"
            assert all(n == 1 for n in delivered_effects(driver).values()), f"seed {seed}"
            duplicates += driver.stats.duplicate_messages
        finally:
            driver.close()
    record(
        duplicate_deliveries=duplicates,
        redelivery_scenarios=len(seeds),
        runs_driven=len(seeds)
        * sum(1 for k in expected if expected[k][0][0] == "workflow.run-started"),
    )


def test_duplicated_shuffled_inputs_reach_the_in_order_state(
    fresh_db: Callable[[], str], samples: WorkflowRegistry
) -> None:
    _compare(fresh_db, samples, range(3))


@pytest.mark.soak
def test_many_duplicated_shuffled_schedules(
    fresh_db: Callable[[], str], samples: WorkflowRegistry
) -> None:
    _compare(fresh_db, samples, range(3, 60))
