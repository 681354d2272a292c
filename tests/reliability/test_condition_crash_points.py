"""Crash points around wait_for_condition (issue 33): three polling workflows in two
tenants that share run ids — one Done on its fourth check then a webhook, one out of
checks (condition_not_met), one whose check raises (caught) — with a crash before or
after any SQL statement or AWS call of the handlers (the trigger's first check, the due
scan, a ResumeRun batch's claim and check, the projection, the dispatcher). The normal
ticks bring every run to the history it has without the crash: each checkpoint is
recorded once with the same state (a crash repeats only the check it cut off), no
suspension is resumed twice, no webhook is requested under two keys, and the tenants'
runs stay apart."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from workflow_runner import Continue, Done, Event, define_workflow, on_event
from workflow_runner.clock import ManualClock
from workflow_runner.definition import WorkflowRegistry

from tests.reliability.harness import (
    TENANT_A,
    TENANT_B,
    Driver,
    FaultPlan,
    check_invariants,
    delivered_effects,
    eventbridge,
    histories,
    one_point_per_boundary,
    record,
    requests_per_effect,
)

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
END = START + timedelta(hours=2)
SOAK_CHUNKS = 4
STRIDE = int(os.environ.get("WFR_CRASH_STRIDE", "1"))
CONDITION = "workflow.condition.waiting"


def _fourth_time(ctx: Any, state: Any) -> Any:
    n = state["n"] + 1
    if n == 4:
        return Done({"job": state["job"], "checks": n})
    return Continue({**state, "n": n})


def _never(ctx: Any, state: Any) -> Any:
    return Continue(state + 1)


def _broken(ctx: Any, state: Any) -> Any:
    if state == 1:
        raise ConnectionError("status endpoint down")
    return Continue(state + 1)


def registry() -> WorkflowRegistry:
    reg = WorkflowRegistry()
    for definition in (
        define_workflow(
            name="poll-job",
            trigger=on_event("job.submitted"),
            idempotency_key=Event.payload["jobId"],
            register=False,
            steps=lambda s: [
                s.wait_for_condition(
                    "job",
                    _fourth_time,
                    initial={"n": 0, "job": Event.payload["jobId"]},
                    every="PT1M",
                    backoff="exponential",
                    cap="PT2M",
                ),
                s.webhook_send(url="https://hooks.example.com/jobs", body=lambda c: c.steps["job"]),
                s.return_(lambda ctx: {"isSuccess": True, "job": ctx.steps["job"]}),
            ],
        ),
        define_workflow(
            name="poll-limit",
            trigger=on_event("job.submitted"),
            idempotency_key=Event.payload["jobId"],
            register=False,
            steps=lambda s: [s.wait_for_condition("n", _never, initial=0, max_attempts=3)],
        ),
        define_workflow(
            name="poll-broken",
            trigger=on_event("job.submitted"),
            idempotency_key=Event.payload["jobId"],
            register=False,
            steps=lambda s: [
                s.wait_for_condition("n", _broken, initial=0, every="PT10M", catch=True),
                s.return_(lambda ctx: ctx.steps["n"]),
            ],
        ),
    ):
        reg.register(definition)
    return reg


def play(db_url: str, samples: WorkflowRegistry, plan: FaultPlan) -> Driver:
    driver = Driver(db_url, samples, ManualClock(START), plan)
    for tenant in (TENANT_A, TENANT_B):
        event = eventbridge(
            "job.submitted", {"tenantId": tenant, "jobId": "j-1"}, event_id=f"ev-{tenant[:2]}"
        )
        driver.send("trigger_projection", event)
    driver.tick()
    driver.run_until(END)
    driver.recover()
    return driver


Baseline = tuple[FaultPlan, dict[Any, Any], set[str]]


def _baseline(db: str, samples: WorkflowRegistry) -> Baseline:
    plan = FaultPlan(keep_labels=True)
    driver = play(db, samples, plan)
    try:
        assert check_invariants(driver.monitor, samples) == []
        got = histories(driver.monitor)
        checkpoints = [e for h in got.values() for e in h if e[0] == CONDITION]
        # poll-job: 3 per tenant; poll-limit: 2; poll-broken: 1 (the second check raised).
        assert len(checkpoints) == 2 * (3 + 2 + 1)
        return plan, got, set(delivered_effects(driver))
    finally:
        driver.close()


def _crash_and_recover(
    fresh_db: Callable[[], str],
    samples: WorkflowRegistry,
    points: list[tuple[int, str]],
    baseline: Baseline,
) -> None:
    _, expected, expected_effects = baseline
    for at, phase in points:
        plan = FaultPlan(at=at, phase=phase)
        driver = play(fresh_db(), samples, plan)
        try:
            where = f"crash {phase} boundary {at} ({plan.fired})"
            assert plan.fired is not None, f"boundary {at} was never reached"
            assert check_invariants(driver.monitor, samples) == [], where
            got = histories(driver.monitor)
            assert got.keys() == expected.keys(), where
            for key in expected:
                assert got[key] == expected[key], f"{where}: stream {key} differs"
            assert set(delivered_effects(driver)) == expected_effects, where
            for step, ids in requests_per_effect(driver).items():
                assert len(ids) == 1, f"{where}: step {step} requested as {ids}"
        finally:
            driver.close()
    record(condition_crash_points=len(points), crash_points=len(points))


@pytest.fixture
def samples() -> WorkflowRegistry:
    return registry()


def test_a_crash_at_each_kind_of_boundary_recovers_to_the_fault_free_history(
    fresh_db: Callable[[], str], samples: WorkflowRegistry
) -> None:
    baseline = _baseline(fresh_db(), samples)
    plan = baseline[0]
    rng = random.Random(33)
    # One point of each boundary kind (each statement and port), in both phases.
    points = one_point_per_boundary(plan, rng)
    _crash_and_recover(fresh_db, samples, points, baseline)


@pytest.mark.soak
@pytest.mark.parametrize("chunk", range(SOAK_CHUNKS))
def test_every_crash_point_around_conditions_recovers(
    chunk: int, fresh_db: Callable[[], str], samples: WorkflowRegistry
) -> None:
    baseline = _baseline(fresh_db(), samples)
    count = baseline[0].count
    every = [(at, phase) for at in range(1, count + 1) for phase in ("before", "after")]
    _crash_and_recover(fresh_db, samples, every[::STRIDE][chunk::SOAK_CHUNKS], baseline)
