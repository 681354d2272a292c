"""s.parallel(branches=[...]): step lists run at once as child runs, with time travel
(the test kit on real PostgreSQL): results in branch order, fail-fast that stops the
other branches, a completion policy's batch, max_concurrency, the empty parallel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from workflow_runner import (
    Completion,
    Continue,
    Done,
    Event,
    RetryPolicy,
    StepContext,
    Steps,
    define_workflow,
    on_call,
    on_event,
)
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowDefinition
from workflow_runner.engine.cancel import cancel_run
from workflow_runner.testing import RunSnapshot, WorkflowTestEnv

from tests.support import TENANT_A

T0 = "2030-01-01T09:00:00Z"
MakeEnv = Callable[..., WorkflowTestEnv]
ONCE = RetryPolicy(max_attempts=1)
CALLS: list[tuple[str, str]] = []  # (task, business time it ran)


class Declined(Exception):
    pass


def quote(carrier: str, fails: bool = False) -> Callable[[StepContext], Any]:
    def run(ctx: StepContext) -> dict[str, Any]:
        CALLS.append((carrier, ctx.now.isoformat()))
        if fails:
            raise Declined(carrier)
        # A branch sees the parent's event and the results stored before the parallel.
        return {"carrier": carrier, "order": ctx.event.payload["id"], "w": ctx.steps["weight"]}

    return run


def flow(
    name: str, branches: Callable[[Any], list[list[Any]]], **options: Any
) -> WorkflowDefinition:
    return define_workflow(
        name=name,
        trigger=on_event(f"{name}.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.compute("weight", lambda ctx: 3),
            s.parallel(branches=branches(s), result_key="quotes", **options),
            s.return_(Steps["quotes"]),
        ],
        register=False,
    )


def workflows() -> list[WorkflowDefinition]:
    return [
        flow(
            "two-waits",
            lambda s: [
                [s.wait(for_="PT2H"), s.task("slow", quote("slow"), retry=ONCE)],
                [
                    s.wait(for_="PT1H"),
                    s.task("fast", quote("fast"), retry=ONCE),
                    s.compute("summary", lambda ctx: ctx.steps["fast"]["carrier"].upper()),
                ],
                [s.task("third", quote("third"), retry=ONCE), s.branch_result({"fixed": 1})],
            ],
        ),
        flow(
            "fail-fast",
            lambda s: [
                [s.task("bad", quote("bad", fails=True), retry=ONCE)],
                [s.wait(for_="PT1H"), s.task("late", quote("late"), retry=ONCE)],
            ],
        ),
        flow(
            "tolerate-one",
            lambda s: [
                [s.task("bad", quote("bad", fails=True), retry=ONCE)],
                [s.wait(for_="PT1H"), s.task("good", quote("good"), retry=ONCE)],
            ],
            completion=Completion(tolerated_failures=1),
        ),
        flow(
            "one-at-a-time",
            lambda s: [
                [s.wait(for_="PT1H"), s.task("first", quote("first"), retry=ONCE)],
                [s.wait(for_="PT1H"), s.task("second", quote("second"), retry=ONCE)],
            ],
            max_concurrency=1,
        ),
        define_workflow(
            name="empty",
            trigger=on_event("empty.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [s.parallel(result_key="none"), s.return_(Steps["none"])],
            register=False,
        ),
        flow(
            "calls-a-workflow",
            lambda s: [
                [s.call_workflow("price", input={"n": 2}, result_key="price")],
                [s.compute("plain", lambda ctx: "x")],
            ],
        ),
        define_workflow(
            name="polls",
            trigger=on_event("polls.go"),
            idempotency_key=Event.payload["id"],
            awaits={"paid": "order.paid"},
            steps=lambda s: [
                s.compute("weight", lambda ctx: 3),
                s.parallel(
                    branches=[
                        [
                            s.wait_for_condition(
                                "ready",
                                lambda ctx, n: Done(n) if n >= 2 else Continue(n + 1),
                                initial=0,
                                every="PT10M",
                            )
                        ],
                        [s.wait_for_event("paid", timeout="P1D", result_key="payment")],
                    ],
                    result_key="both",
                ),
                s.return_(Steps["both"]),
            ],
            register=False,
        ),
        define_workflow(
            name="heavy",
            trigger=on_event("heavy.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.compute("a", lambda ctx: "x" * 150_000),
                s.compute("b", lambda ctx: "y" * 150_000),
                s.parallel(branches=[[s.compute("c", lambda ctx: 1)]], result_key="r"),
            ],
            register=False,
        ),
        define_workflow(
            name="sneaky",
            trigger=on_event("sneaky.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [s.call_workflow("two-waits/1/branch-2", result_key="r")],
            register=False,
        ),
        define_workflow(
            name="price",
            trigger=on_call(),
            steps=lambda s: [s.return_({"price": 10})],
            register=False,
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


def again(env: WorkflowTestEnv, run: RunSnapshot) -> RunSnapshot:
    return env.run(tenant=TENANT_A, workflow=run.workflow, run_id=run.run_id)


def branch_runs(env: WorkflowTestEnv, parent: RunSnapshot) -> list[RunSnapshot]:
    runs = [
        r
        for r in env.runs(tenant=TENANT_A)
        if r.workflow.startswith(f"{parent.workflow}/1/branch-")
    ]
    return sorted(runs, key=lambda r: r.workflow)


def test_branches_wait_their_own_time_and_results_come_in_branch_order(
    env: WorkflowTestEnv,
) -> None:
    run = go(env, "two-waits")
    assert run.status == "waiting"
    assert [c[0] for c in CALLS] == ["third"]
    env.advance("PT1H")
    assert [c[0] for c in CALLS] == ["third", "fast"]
    assert again(env, run).status == "waiting"
    env.advance("PT1H")
    run = again(env, run)
    assert run.status == "completed"
    # Branch order, not finishing order: the last storing step's value, or branch_result.
    assert run.result == [
        {"carrier": "slow", "order": "p1", "w": 3},
        "FAST",
        {"fixed": 1},
    ]
    assert [c[0] for c in CALLS] == ["third", "fast", "slow"]
    branches = branch_runs(env, run)
    assert [b.workflow for b in branches] == [f"two-waits/1/branch-{k}" for k in range(3)]
    assert all(b.status == "completed" for b in branches)


def test_a_failing_branch_fails_the_step_and_cancels_the_other(env: WorkflowTestEnv) -> None:
    run = go(env, "fail-fast")
    assert (run.status, run.reason) == ("failed", "child_failed")
    statuses = [b.status for b in branch_runs(env, run)]
    assert statuses == ["failed", "cancelled"]
    env.advance("PT2H")
    assert [c[0] for c in CALLS] == ["bad"]  # the cancelled branch never ran its task


def test_a_completion_policy_yields_the_batch_of_the_branches(env: WorkflowTestEnv) -> None:
    run = go(env, "tolerate-one")
    assert run.status == "waiting"
    env.advance("PT1H")
    run = again(env, run)
    assert run.status == "completed"
    [bad, _] = branch_runs(env, run)
    assert run.result == {
        "results": [None, {"carrier": "good", "order": "p1", "w": 3}],
        "failures": [{"index": 0, "reason": "task_failed", "runId": bad.run_id}],
        "succeeded": 1,
        "failed": 1,
        "completion": "all_completed",
    }


def test_max_concurrency_one_runs_the_branches_one_after_another(env: WorkflowTestEnv) -> None:
    run = go(env, "one-at-a-time")
    env.advance("PT1H")
    assert [c[0] for c in CALLS] == ["first"]
    assert again(env, run).status == "waiting"
    env.advance("PT1H")
    run = again(env, run)
    assert run.status == "completed"
    assert [c[0] for c in CALLS] == ["first", "second"]
    assert CALLS[0][1] < CALLS[1][1]  # the second branch started after the first ended
    assert [r["carrier"] for r in run.result] == ["first", "second"]


def test_an_empty_parallel_completes_with_an_empty_list(env: WorkflowTestEnv) -> None:
    run = go(env, "empty")
    assert (run.status, run.result) == ("completed", [])


def test_a_branch_calls_a_workflow(env: WorkflowTestEnv) -> None:
    run = go(env, "calls-a-workflow")
    env.advance("PT1S")
    run = again(env, run)
    assert run.status == "completed"
    assert run.result == [{"price": 10}, "x"]


def test_the_parent_timeline_names_the_branches(env: WorkflowTestEnv) -> None:
    run = go(env, "two-waits")
    text = next(e.text for e in run.events if e.type == ev.CHILDREN_WAITING)
    assert "parallel of 3 branch(es)" in text


def test_a_branch_is_no_workflow_anything_else_may_start(env: WorkflowTestEnv) -> None:
    run = go(env, "sneaky")
    assert (run.status, run.reason) == ("failed", "child_failed")
    assert not [r for r in env.runs(tenant=TENANT_A) if r.workflow == "two-waits/1/branch-2"]


def test_stub_task_reaches_a_task_inside_a_branch(env: WorkflowTestEnv) -> None:
    env.stub_task("third", lambda ctx: {"stubbed": True})
    run = go(env, "two-waits")
    env.advance("PT2H")
    run = again(env, run)
    assert run.status == "completed"
    assert run.result[2] == {"fixed": 1}
    third = next(r for r in branch_runs(env, run) if r.workflow.endswith("branch-2"))
    assert third.steps["third"] == {"stubbed": True}
    assert "third" not in [c[0] for c in CALLS]


def test_a_branch_input_over_the_size_limit_fails_the_step(env: WorkflowTestEnv) -> None:
    run = go(env, "heavy")  # each result fits; the run's results together do not
    assert (run.status, run.reason) == ("failed", "result_not_storable")
    assert not [r for r in env.runs(tenant=TENANT_A) if r.workflow.startswith("heavy/")]


def test_a_branch_polls_a_condition_while_another_waits_for_an_event(
    env: WorkflowTestEnv,
) -> None:
    run = go(env, "polls")
    env.advance("PT20M")  # the condition is met on its third check
    assert again(env, run).status == "waiting"  # the other branch still waits
    env.put_event(tenant=TENANT_A, type="order.paid", payload={"id": "p1", "amount": 5})
    env.advance("PT1S")
    run = again(env, run)
    assert run.status == "completed"
    ready, payment = run.result
    assert (ready, payment["amount"]) == (2, 5)


def test_cancelling_the_run_cancels_its_branches(env: WorkflowTestEnv) -> None:
    run = go(env, "one-at-a-time")  # branch 0 waits, branch 1 not started yet
    [first] = branch_runs(env, run)
    cancel_run(env.store, TENANT_A, run.run_id, env.now, "no longer needed")
    env.runtime.catch_up()
    assert again(env, run).status == "cancelled"
    assert again(env, first).status == "cancelled"
    env.advance("PT3H")
    assert CALLS == []  # neither branch ran its task, the second never started
    assert [b.status for b in branch_runs(env, run)] == ["cancelled"]
