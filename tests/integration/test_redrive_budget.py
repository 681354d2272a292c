"""Redrive gives every exhausted retry around the failure a fresh budget, also when the
failed pass entered the step tree at a wait inside the retry (issue 11, item 4)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from workflow_runner import ManualClock, define_workflow, on_event
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine.redrive import redrive_run
from workflow_runner.store import Store

from tests.support import TENANT_A, event

PARTNER = {"down": True}


def _call_partner(ctx: Any) -> dict[str, int]:
    if PARTNER["down"]:
        raise ConnectionError("partner down")
    return {"attempt": ctx.workflow.retry_attempt}


def _register(registry: WorkflowRegistry) -> None:
    registry.register(
        define_workflow(
            name="wait-in-retry",
            trigger=on_event("wir.started"),
            idempotency_key="k",
            register=False,
            steps=lambda s: [
                s.retry(
                    times=3,
                    backoff="fixed",
                    base="PT1M",
                    do=[s.wait(for_="PT10M"), s.compute("partner", _call_partner)],
                ),
                s.return_(lambda ctx: {"isSuccess": True, "partner": ctx.steps["partner"]}),
            ],
        )
    )


def _drive_to_failure(store: Store, registry: WorkflowRegistry, clock: ManualClock) -> str:
    result = ops.ingest_domain_event(store, event("wir.started", {}), clock.now(), registry)
    run_id = result.started[0].run_id
    for _ in range(10):
        state = ops.load_run(store, TENANT_A, run_id)
        if state.status != "waiting":
            break
        assert state.suspension is not None
        clock.set(max(clock.now(), state.suspension.due_at))
        ops.resume_run(
            store, TENANT_A, run_id, state.suspension.step_index, clock.now(), registry=registry
        )
    assert ops.load_run(store, TENANT_A, run_id).status == "failed"
    return run_id


def test_redrive_restarts_a_retry_whose_failed_pass_entered_at_a_wait_inside_it(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    PARTNER["down"] = True
    _register(registry)
    run_id = _drive_to_failure(store, registry, clock)

    # The partner is still down: with a fresh budget the redriven pass schedules attempt
    # 2 of 3 instead of failing again at once.
    result = redrive_run(store, TENANT_A, run_id, clock.now() + timedelta(minutes=1), registry)

    assert result.path == [{"i": 0, "attempt": 1}, {"i": 0}]
    assert result.outcome == "suspended"
    last = store.streams.load(TENANT_A, run_id)[-1]
    assert last.type == ev.RETRY_SCHEDULED
    assert (last.payload["attempt"], last.payload["path"]) == (1, [{"i": 0, "attempt": 2}])


def test_a_redriven_retry_completes_once_the_partner_is_back(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    PARTNER["down"] = True
    _register(registry)
    run_id = _drive_to_failure(store, registry, clock)
    redrive_run(store, TENANT_A, run_id, clock.now(), registry)
    PARTNER["down"] = False
    state = ops.load_run(store, TENANT_A, run_id)
    assert state.suspension is not None
    clock.set(state.suspension.due_at)
    ops.resume_run(store, TENANT_A, run_id, 0, clock.now(), registry=registry)  # attempt 2: wait
    state = ops.load_run(store, TENANT_A, run_id)
    assert state.suspension is not None
    clock.set(state.suspension.due_at)
    result = ops.resume_run(store, TENANT_A, run_id, 0, clock.now(), registry=registry)
    assert result.outcome == "completed"
    done = store.streams.load(TENANT_A, run_id)[-1]
    assert done.payload["result"] == {"isSuccess": True, "partner": {"attempt": 2}}
