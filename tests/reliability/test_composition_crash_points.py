"""Crash points in composition (issue 30): the composition scenario (parents that call
and map children, shared children, a call attached to a run an event started, a
start_workflow child, a map whose failing item fails its parent, two cancels and a
redrive; composition_scenario.py) with a crash before or after a round trip or AWS
call of the worker starting children, a second parent attaching, the worker reviving
a redriven parent's children, a child's settling pass, a parent's last pass, the
worker counting settled children, the operator's cancel and redrive. The normal
functions and the worker alone (the operator repeats a command that failed) bring
every run to the history it has without the crash, and the join invariants hold
(harness.check_joins: no child started twice, every settled child counted by each of
its joins, no parent waiting on a settled child, no run cancelled while another owner
waited, the doctor all ok)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.reliability import composition_scenario as scenario
from tests.reliability.harness import (
    FaultPlan,
    check_invariants,
    check_joins,
    histories,
    record,
)

SOAK_CHUNKS = 8
Point = tuple[str, int, str]  # (operation, boundary, phase)


@dataclass(frozen=True)
class Baseline:
    histories: dict[tuple[str, str], list[tuple[str, Any]]]
    points: dict[str, list[int]]  # boundary numbers by operation


def _baseline(db: str) -> Baseline:
    plan = FaultPlan(keep_labels=True)
    operations = scenario.OperationMap(plan)
    with operations.recording():
        driver = scenario.play(db, plan)
    try:
        store, registry = driver.monitor, driver.registry
        assert check_invariants(store, registry) == []
        assert check_joins(store, registry, driver.clock.now()) == []
        points = operations.points(store)
        assert all(points.values()), {op: len(at) for op, at in points.items()}
        return Baseline(histories(store), points)
    finally:
        driver.close()


def _crash_and_recover(fresh_db: Callable[[], str], points: list[Point], base: Baseline) -> None:
    kinds: Counter[str] = Counter()
    operations: Counter[str] = Counter()
    for operation, at, phase in points:
        plan = FaultPlan(at=at, phase=phase)
        driver = scenario.play(fresh_db(), plan)
        try:
            where = f"crash {phase} boundary {at} of {operation} ({plan.fired})"
            assert plan.fired is not None, f"{where}: never reached"
            store, registry = driver.monitor, driver.registry
            assert check_invariants(store, registry) == [], where
            assert check_joins(store, registry, driver.clock.now()) == [], where
            got = histories(store)
            assert got.keys() == base.histories.keys(), where
            for key, expected in base.histories.items():
                assert got[key] == expected, f"{where}: stream {key} differs"
            kind = plan.fired.split(" ", 1)[1].split(":", 1)[0].split(".")[0]
            kinds[f"crash_{phase}_{kind}"] += 1
            operations[f"composition_crash_{operation}"] += 1
        finally:
            driver.close()
    runs = sum(1 for h in base.histories.values() if h[0][0] == "workflow.run-started")
    record(
        crash_points=len(points),
        composition_crash_points=len(points),
        runs_driven=len(points) * runs,
        **operations,
        **kinds,
    )


def _every_point(base: Baseline) -> list[Point]:
    return [
        (operation, at, phase)
        for operation, boundaries in base.points.items()
        for at in boundaries
        for phase in ("before", "after")
    ]


def test_a_crash_in_each_composition_operation_recovers_to_the_fault_free_history(
    fresh_db: Callable[[], str],
) -> None:
    base = _baseline(fresh_db())
    rng = random.Random(30)
    points = [
        (operation, rng.choice(boundaries), rng.choice(["before", "after"]))
        for operation, boundaries in base.points.items()
    ]
    _crash_and_recover(fresh_db, points, base)


@pytest.mark.soak
@pytest.mark.parametrize("chunk", range(SOAK_CHUNKS))
def test_every_crash_point_in_composition_recovers_to_the_fault_free_history(
    chunk: int, fresh_db: Callable[[], str]
) -> None:
    base = _baseline(fresh_db())
    points = _every_point(base)[chunk::SOAK_CHUNKS]
    _crash_and_recover(fresh_db, points, base)
