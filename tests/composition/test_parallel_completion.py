"""A parallel's completion policy and its stop: the tasks without an outcome when the
policy decides (or, without one, when a task fails that the parallel does not catch)
never run again (real PostgreSQL, through the handlers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from workflow_runner import (
    Completion,
    Event,
    RetryPolicy,
    StepContext,
    Steps,
    define_workflow,
    on_event,
)
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowDefinition
from workflow_runner.testing import RunSnapshot, WorkflowTestEnv

from tests.support import TENANT_A

T0 = "2030-01-01T09:00:00Z"
MakeEnv = Callable[..., WorkflowTestEnv]
ONCE = RetryPolicy(max_attempts=1)
# Attempt 1 fails (retryable), attempt 2 an hour later.
LATER = RetryPolicy(max_attempts=2, base="PT1H", jitter="none")
CALLS: list[tuple[str, int]] = []


class Declined(Exception):
    pass


def answer(key: str, fails: bool = False, first_fails: bool = False) -> Any:
    def run(ctx: StepContext) -> dict[str, str]:
        CALLS.append((key, ctx.workflow.retry_attempt))
        if fails:
            raise Declined(key)
        if first_fails and ctx.workflow.retry_attempt == 1:
            raise TimeoutError(key)
        return {"from": key}

    return run


def workflows() -> list[WorkflowDefinition]:
    def flow(name: str, tasks: Callable[[Any], list[Any]], **options: Any) -> WorkflowDefinition:
        return define_workflow(
            name=name,
            trigger=on_event(f"{name}.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.parallel(*tasks(s), result_key="batch", **options),
                s.return_(Steps["batch"]),
            ],
            register=False,
        )

    return [
        flow(
            "two-of-three",
            lambda s: [s.task(k, answer(k), retry=ONCE) for k in ("a", "b", "c")],
            completion=Completion(min_successful=2),
        ),
        flow(
            "tolerate-one",
            lambda s: [
                s.task("a", answer("a", fails=True), retry=ONCE),
                s.task("b", answer("b", fails=True), retry=ONCE),
                s.task("c", answer("c", first_fails=True), retry=LATER),
            ],
            completion=Completion(tolerated_failures=1),
        ),
        flow(
            "tolerate-one-catch",
            lambda s: [
                s.task("a", answer("a", fails=True), retry=ONCE),
                s.task("b", answer("b", fails=True), retry=ONCE),
            ],
            completion=Completion(tolerated_failures=1),
            catch=True,
        ),
        flow(
            "fail-fast",
            lambda s: [
                s.task("a", answer("a", fails=True), retry=ONCE),
                s.task("b", answer("b", first_fails=True), retry=LATER),
                s.task("c", answer("c", first_fails=True), retry=LATER),
            ],
        ),
    ]


@pytest.fixture
def env(make_env: MakeEnv) -> WorkflowTestEnv:
    CALLS.clear()
    return make_env(workflows=workflows(), now=T0)


def go(env: WorkflowTestEnv, workflow: str) -> RunSnapshot:
    env.put_event(tenant=TENANT_A, type=f"{workflow}.go", payload={"id": "p1"})
    env.advance("PT1S")
    return env.run(tenant=TENANT_A, workflow=workflow, key="p1")


def stopped(run: RunSnapshot) -> dict[str, Any]:
    [fact] = [e.payload for e in run.events if e.type == ev.STEP_STOPPED]
    return fact


def test_two_successes_of_three_end_the_parallel_and_the_third_never_runs(
    env: WorkflowTestEnv,
) -> None:
    run = go(env, "two-of-three")
    assert run.status == "completed"
    batch = run.result
    assert (batch["succeeded"], batch["failed"], batch["completion"]) == (
        2,
        0,
        "min_successful_reached",
    )
    [never] = stopped(run)["taskKeys"]  # the worker's claim order decides which
    assert never not in {key for key, _ in CALLS} and len(CALLS) == 2
    position = "abc".index(never)
    assert batch["results"][position] is None
    assert [r for r in batch["results"] if r is not None] == [
        {"from": key} for key in "abc" if key != never
    ]
    env.advance("PT1H")
    assert len(CALLS) == 2
    row = env.store.tasks.find("stuck", env.now, env.now)  # nothing left open
    assert row == []


def test_a_second_failure_exceeds_the_tolerance_and_stops_the_retrying_task(
    env: WorkflowTestEnv,
) -> None:
    run = go(env, "tolerate-one")
    assert (run.status, run.reason) == ("failed", "failure_tolerance_exceeded")
    assert stopped(run)["taskKeys"] == ["c"]  # waiting for its second attempt
    env.advance("PT2H")
    assert ("c", 2) not in CALLS


def test_catch_hands_over_the_batch_with_the_task_failures(env: WorkflowTestEnv) -> None:
    run = go(env, "tolerate-one-catch")
    assert run.status == "completed"
    assert run.result == {
        "results": [None, None],
        "failures": [
            {"index": 0, "reason": "attempts_exhausted", "taskKey": "a", "error": "Declined"},
            {"index": 1, "reason": "attempts_exhausted", "taskKey": "b", "error": "Declined"},
        ],
        "succeeded": 0,
        "failed": 2,
        "completion": "failure_tolerance_exceeded",
    }


def test_without_a_policy_an_uncaught_failure_stops_the_other_tasks(
    env: WorkflowTestEnv,
) -> None:
    run = go(env, "fail-fast")
    assert (run.status, run.reason) == ("failed", "task_failed")
    stop = stopped(run)
    assert (stop["reason"], stop["taskKeys"]) == ("task_failed", ["b", "c"])
    env.advance("PT2H")
    assert not [call for call in CALLS if call[1] == 2]  # no second attempt ever ran
    text = next(e.text for e in run.events if e.type == ev.STEP_STOPPED)
    assert text == "step 0: parallel stopped (task_failed): task(s) 'b', 'c' not run again"
