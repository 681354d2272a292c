"""A parallel's branches on real PostgreSQL through the handlers: a redrive of the run
whose branch failed reruns only that branch (the branch that completed keeps its result
and runs nothing again), a branch the fail-fast cancelled goes on from where it stood,
and a worker that dies during a branch's task leaves nothing half done."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from workflow_runner import (
    Event,
    RetryPolicy,
    StepContext,
    Steps,
    define_workflow,
    on_event,
)
from workflow_runner.definition import WorkflowDefinition
from workflow_runner.engine.redrive import redrive_run
from workflow_runner.testing import RunSnapshot, WorkflowTestEnv

from tests.support import TENANT_A

T0 = "2030-01-01T09:00:00Z"
ONCE = RetryPolicy(max_attempts=1)
BROKEN = {"flaky": True}
CALLS: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    BROKEN["flaky"] = True
    CALLS.clear()


def call(name: str) -> Callable[[StepContext], Any]:
    def run(ctx: StepContext) -> dict[str, Any]:
        CALLS.append(name)
        if name.startswith("flaky") and BROKEN["flaky"]:
            raise RuntimeError("the carrier is down")
        return {"from": name, "order": ctx.event.payload["id"]}

    return run


def workflows() -> list[WorkflowDefinition]:
    def flow(name: str, branches: Callable[[Any], list[list[Any]]]) -> WorkflowDefinition:
        return define_workflow(
            name=name,
            trigger=on_event(f"{name}.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.parallel(branches=branches(s), result_key="all"),
                s.return_(Steps["all"]),
            ],
            register=False,
        )

    return [
        flow(
            "late-failure",
            lambda s: [
                [s.task("ok", call("ok"), retry=ONCE)],
                [s.wait(for_="PT1H"), s.task("flaky", call("flaky"), retry=ONCE)],
            ],
        ),
        flow(
            "early-failure",
            lambda s: [
                [s.wait(for_="PT1H"), s.task("slow", call("slow"), retry=ONCE)],
                [s.task("flaky-now", call("flaky-now"), retry=ONCE)],
            ],
        ),
        flow(
            "crashing",
            lambda s: [
                [s.task("charge", call("charge"), timeout="PT30S")],
                [s.compute("plain", lambda ctx: "x")],
            ],
        ),
    ]


@pytest.fixture
def env(pg_server_url: str) -> Iterator[WorkflowTestEnv]:
    with ExitStack() as stack:
        yield stack.enter_context(
            WorkflowTestEnv(workflows=workflows(), now=T0, database_url=pg_server_url)
        )


def go(env: WorkflowTestEnv, workflow: str) -> RunSnapshot:
    env.put_event(tenant=TENANT_A, type=f"{workflow}.go", payload={"id": "o1"})
    env.advance("PT1S")
    return env.run(tenant=TENANT_A, workflow=workflow, key="o1")


def again(env: WorkflowTestEnv, run: RunSnapshot) -> RunSnapshot:
    return env.run(tenant=TENANT_A, workflow=run.workflow, run_id=run.run_id)


def branches(env: WorkflowTestEnv, workflow: str) -> dict[str, RunSnapshot]:
    return {
        r.workflow: r
        for r in env.runs(tenant=TENANT_A)
        if r.workflow.startswith(f"{workflow}/0/branch-")
    }


def redrive(env: WorkflowTestEnv, run: RunSnapshot) -> None:
    BROKEN["flaky"] = False
    redrive_run(env.store, TENANT_A, run.run_id, env.now, registry=env.registry)
    env.runtime.catch_up()


def test_a_redrive_reruns_only_the_branch_that_failed(env: WorkflowTestEnv) -> None:
    run = go(env, "late-failure")
    env.advance("PT1H")
    run = again(env, run)
    assert (run.status, run.reason) == ("failed", "child_failed")
    before = branches(env, "late-failure")
    assert {k: r.status for k, r in before.items()} == {
        "late-failure/0/branch-0": "completed",
        "late-failure/0/branch-1": "failed",
    }
    assert CALLS == ["ok", "flaky"]
    redrive(env, run)
    env.advance("PT1S")
    run = again(env, run)
    assert run.status == "completed"
    assert run.result == [{"from": "ok", "order": "o1"}, {"from": "flaky", "order": "o1"}]
    assert CALLS == ["ok", "flaky", "flaky"]  # branch 0 ran nothing again
    after = branches(env, "late-failure")
    # The same two branch runs (none new); the failed one was redriven at its task.
    assert {k: r.run_id for k, r in after.items()} == {k: r.run_id for k, r in before.items()}
    assert all(r.status == "completed" for r in after.values())
    assert after["late-failure/0/branch-0"].events == before["late-failure/0/branch-0"].events


def test_a_branch_the_failure_cancelled_goes_on_after_the_redrive(env: WorkflowTestEnv) -> None:
    run = go(env, "early-failure")
    run = again(env, run)
    assert (run.status, run.reason) == ("failed", "child_failed")
    states = {k: r.status for k, r in branches(env, "early-failure").items()}
    assert states == {
        "early-failure/0/branch-0": "cancelled",  # it was waiting: the fail-fast stopped it
        "early-failure/0/branch-1": "failed",
    }
    redrive(env, run)
    # The cancelled branch is revived at the wait it stood at (a revive re-enters the
    # step it stopped at, as it does for a map's cancelled child) and goes on from there.
    env.advance("PT1H")
    run = again(env, run)
    assert run.status == "completed"
    assert [r["from"] for r in run.result] == ["slow", "flaky-now"]
    assert sorted(CALLS) == ["flaky-now", "flaky-now", "slow"]


def test_a_worker_dying_during_a_branchs_task_retries_it(env: WorkflowTestEnv) -> None:
    env.crash_task("charge", attempt=1)
    run = go(env, "crashing")
    assert again(env, run).status == "waiting"
    assert CALLS == ["charge"]  # attempt 1 ran; its outcome was never recorded
    env.advance("PT2M")  # past the attempt's lease
    run = again(env, run)
    assert run.status == "completed"
    assert CALLS == ["charge", "charge"]
    assert run.result == [{"from": "charge", "order": "o1"}, "x"]
