"""Crash at every point: a crash before or after any SQL statement or AWS call, in any
handler, is repaired by the normal ticks and leaves the same histories as a run
without faults, with no effect recorded twice and no request under two keys."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import pytest
from workflow_runner.definition import WorkflowRegistry

from tests.reliability.harness import (
    FaultPlan,
    ambiguous_mail,
    check_invariants,
    delivered_effects,
    histories,
    one_point_per_boundary,
    record,
    requests_per_effect,
)
from tests.reliability.scenario import play

SOAK_CHUNKS = 16
# The soak sweeps every STRIDE-th point, from OFFSET (`make soak` sets the stride: on a
# busy shared machine the whole sweep takes hours; OFFSET 1 .. STRIDE-1 sweep the rest).
STRIDE = int(os.environ.get("WFR_CRASH_STRIDE", "1"))
OFFSET = int(os.environ.get("WFR_CRASH_OFFSET", "0"))
# The boundaries between marking a mail as being sent and recording its outcome.
MAIL_WINDOW = ("mark_dispatch_sending", "ses.send_mail", "append_event", "settle_dispatch")


def _baseline(db: str, samples: WorkflowRegistry) -> tuple[FaultPlan, dict, set[str]]:  # type: ignore[type-arg]
    plan = FaultPlan(keep_labels=True)
    driver = play(db, samples, plan)
    try:
        assert check_invariants(driver.monitor, samples) == []
        return plan, histories(driver.monitor), set(delivered_effects(driver))
    finally:
        driver.close()


def _crash_and_recover(
    fresh_db: Callable[[], str],
    samples: WorkflowRegistry,
    points: list[tuple[int, str]],
    baseline: tuple[FaultPlan, dict, set[str]],  # type: ignore[type-arg]
) -> None:
    _, expected, expected_effects = baseline
    kinds: dict[str, int] = {}
    redelivered = 0
    ambiguous = 0
    for at, phase in points:
        plan = FaultPlan(at=at, phase=phase)
        driver = play(fresh_db(), samples, plan)
        try:
            where = f"crash {phase} boundary {at} ({plan.fired})"
            assert plan.fired is not None, f"boundary {at} was never reached"
            assert check_invariants(driver.monitor, samples) == [], where
            got = histories(driver.monitor)
            assert got.keys() == expected.keys(), where
            cut_off: set[str] = set()
            for key in expected:
                if got[key] != expected[key] and ambiguous_mail(got[key]):
                    # Mail is sent at most once: a crash between marking it as being
                    # sent and recording the outcome ends it ambiguous, never resent.
                    assert any(w in (plan.fired or "") for w in MAIL_WINDOW), where
                    cut_off.add(key[1])
                    continue
                assert got[key] == expected[key], f"{where}: stream {key} differs"
            effects = delivered_effects(driver)
            assert set(effects) - cut_off == expected_effects - cut_off, where
            assert all(effects.get(request, 0) <= 1 for request in cut_off), where
            ambiguous += len(cut_off)
            for step, ids in requests_per_effect(driver).items():
                assert len(ids) == 1, f"{where}: step {step} requested as {ids}"
            redelivered += sum(n - 1 for n in effects.values())
            kind = plan.fired.split(" ", 1)[1].split(":", 1)[0].split(".")[0]
            kinds[f"crash_{phase}_{kind}"] = kinds.get(f"crash_{phase}_{kind}", 0) + 1
        finally:
            driver.close()
    runs = sum(1 for k in expected if expected[k][0][0] == "workflow.run-started")
    record(
        crash_points=len(points),
        runs_driven=len(points) * runs,
        same_key_redeliveries=redelivered,
        ambiguous_mails=ambiguous,
        **kinds,
    )


def test_a_sample_of_crash_points_recovers_to_the_fault_free_history(
    fresh_db: Callable[[], str], samples: WorkflowRegistry
) -> None:
    baseline = _baseline(fresh_db(), samples)
    plan = baseline[0]
    # Cover every kind of boundary (each port, statements of each handler), then random.
    rng = random.Random(5)
    points = one_point_per_boundary(
        plan, rng, lambda label: label.split(":")[0] if label.startswith("sql") else label
    )
    points += [(rng.randint(1, plan.count), rng.choice(["before", "after"])) for _ in range(8)]
    _crash_and_recover(fresh_db, samples, points, baseline)


@pytest.mark.soak
@pytest.mark.parametrize("chunk", range(SOAK_CHUNKS))
def test_every_crash_point_recovers_to_the_fault_free_history(
    chunk: int, fresh_db: Callable[[], str], samples: WorkflowRegistry
) -> None:
    baseline = _baseline(fresh_db(), samples)
    count = baseline[0].count
    every = [(at, phase) for at in range(1, count + 1) for phase in ("before", "after")]
    points = every[OFFSET::STRIDE][chunk::SOAK_CHUNKS]
    _crash_and_recover(fresh_db, samples, points, baseline)
    record(sample_sweep_stride=STRIDE)
