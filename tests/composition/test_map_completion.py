"""A map's completion policy, its batch result, its stop (children not started never
start, running ones are cancelled, recorded on both sides), fail-fast without a policy,
and the item index a child knows (real PostgreSQL, through the handlers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from workflow_runner import (
    Completion,
    Event,
    StepContext,
    Steps,
    define_workflow,
    on_call,
    on_event,
)
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowDefinition
from workflow_runner.testing import RunSnapshot, WorkflowTestEnv

from tests.support import TENANT_A

T0 = "2030-01-01T09:00:00Z"
MakeEnv = Callable[..., WorkflowTestEnv]
SEEN_BY_TASKS: list[int | None] = []


def item_index(ctx: StepContext) -> dict[str, Any]:
    SEEN_BY_TASKS.append(ctx.workflow.map_index)
    return {"index": ctx.workflow.map_index}


def workflows() -> list[WorkflowDefinition]:
    """`kid` waits its item's minutes, then fails (`bad`) or returns its index; `tasked`
    asks a task for its index; the mappers run them under policies."""
    kid = define_workflow(
        name="kid",
        trigger=on_call(),
        steps=lambda s: [
            s.wait(for_=lambda ctx: f"PT{ctx.event.payload['m']}M"),
            s.branch(
                if_=Event.payload["bad"],
                on_true=[s.return_({"isSuccess": False, "error": "bad item"})],
                on_false=[s.return_(lambda ctx: {"i": ctx.workflow.map_index})],
            ),
        ],
        register=False,
    )
    tasked = define_workflow(
        name="tasked",
        trigger=on_call(),
        steps=lambda s: [s.task("where", item_index), s.return_(Steps["where"])],
        register=False,
    )

    def mapper(
        name: str,
        completion: Completion | None,
        catch: bool = False,
        concurrency: int = 10,
        child: str = "kid",
    ) -> WorkflowDefinition:
        return define_workflow(
            name=name,
            trigger=on_event(f"{name}.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.map(
                    Event.payload["items"],
                    workflow=child,
                    key=lambda ctx: ctx.scope["item"].get("key"),
                    concurrency=concurrency,
                    result_key="batch",
                    catch=catch,
                    completion=completion,
                ),
                s.return_(Steps["batch"]),
            ],
            register=False,
        )

    caller = define_workflow(
        name="caller",
        trigger=on_event("caller.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.call_workflow("kid", input=Event.payload["input"], key="shared", result_key="c"),
            s.return_(Steps["c"]),
        ],
        register=False,
    )
    return [
        kid,
        tasked,
        caller,
        mapper("quorum", Completion(min_successful=2), concurrency=3),
        mapper("tolerant", Completion(tolerated_failures=1)),
        mapper("tolerant-catch", Completion(tolerated_failures=1), catch=True),
        mapper("everything", Completion()),
        mapper("fast-fail", None),
        mapper("indexed", None, child="tasked"),
    ]


@pytest.fixture
def env(make_env: MakeEnv) -> WorkflowTestEnv:
    SEEN_BY_TASKS.clear()
    return make_env(workflows=workflows(), now=T0)


def item(minutes: int, bad: bool = False, key: str | None = None) -> dict[str, Any]:
    return {"m": minutes, "bad": bad, **({"key": key} if key else {})}


def go(env: WorkflowTestEnv, workflow: str, *items: dict[str, Any]) -> None:
    env.put_event(tenant=TENANT_A, type=f"{workflow}.go", payload={"id": "m1", "items": items})


def parent(env: WorkflowTestEnv, workflow: str) -> RunSnapshot:
    return env.run(tenant=TENANT_A, workflow=workflow, key="m1")


def kids(env: WorkflowTestEnv) -> dict[int, RunSnapshot]:
    """The parent's children by item index (those that started)."""
    runs = env.runs(tenant=TENANT_A, workflow="kid")
    return {k.events[0].payload["mapIndex"]: k for k in runs if "mapIndex" in k.events[0].payload}


def stopped(run: RunSnapshot) -> dict[str, Any]:
    [fact] = [e.payload for e in run.events if e.type == ev.STEP_STOPPED]
    return fact


def test_reaching_min_successful_stops_the_map_at_once(env: WorkflowTestEnv) -> None:
    go(env, "quorum", item(1), item(2), item(10), item(10), item(10))
    env.advance("PT1M")  # item 0 done: its slot starts item 3
    assert sorted(kids(env)) == [0, 1, 2, 3]
    env.advance("PT1M")  # item 1 done: two succeeded

    run = parent(env, "quorum")
    assert run.status == "completed"
    assert run.result == {
        "results": [{"i": 0}, {"i": 1}, None, None, None],
        "failures": [],
        "succeeded": 2,
        "failed": 0,
        "completion": "min_successful_reached",
    }
    assert stopped(run) == {
        "kind": "map",
        "stepIndex": 0,
        "path": [{"i": 0}],
        "suspensionVersion": 2,
        "reason": "min_successful_reached",
        "cancelled": [2, 3],
        "joinId": stopped(run)["joinId"],
        "notStarted": 1,
    }
    children = kids(env)
    for index in (2, 3):
        assert children[index].status == "cancelled"
        cancel = next(e for e in children[index].events if e.type == ev.RUN_CANCELLED)
        assert cancel.payload["reason"] == "map stopped (min_successful_reached)"
    env.advance("PT20M")
    assert sorted(kids(env)) == [0, 1, 2, 3]  # item 4 never started
    text = next(e.text for e in run.events if e.type == ev.STEP_STOPPED)
    assert text == (
        "step 0: map stopped (min_successful_reached): cancelled item(s) 2, 3; 1 never started"
    )


def test_a_failure_at_the_tolerance_goes_on_and_the_next_one_fails_the_run(
    env: WorkflowTestEnv,
) -> None:
    go(env, "tolerant", item(1, bad=True), item(2), item(3, bad=True), item(10))
    env.advance("PT2M")
    assert parent(env, "tolerant").status == "waiting"  # one failure: tolerated
    env.advance("PT1M")
    run = parent(env, "tolerant")
    assert (run.status, run.reason) == ("failed", "failure_tolerance_exceeded")
    assert run.error == "workflow step failed (FailureToleranceExceeded)"
    assert stopped(run)["cancelled"] == [3]
    assert kids(env)[3].status == "cancelled"


def test_catch_hands_over_the_batch_when_the_tolerance_is_exceeded(env: WorkflowTestEnv) -> None:
    go(env, "tolerant-catch", item(1, bad=True), item(2), item(3, bad=True), item(10))
    env.advance("PT3M")
    run = parent(env, "tolerant-catch")
    children = kids(env)
    assert run.status == "completed"
    assert run.result == {
        "results": [None, {"i": 1}, None, None],
        "failures": [
            {"index": 0, "reason": "returned_failure", "runId": children[0].run_id},
            {"index": 2, "reason": "returned_failure", "runId": children[2].run_id},
        ],
        "succeeded": 1,
        "failed": 2,
        "completion": "failure_tolerance_exceeded",
    }


def test_a_policy_without_thresholds_runs_every_item_into_the_batch(env: WorkflowTestEnv) -> None:
    go(env, "everything", item(1, bad=True), item(2), item(3, bad=True))
    env.advance("PT3M")
    run = parent(env, "everything")
    assert run.status == "completed"
    assert (run.result["succeeded"], run.result["failed"]) == (1, 2)
    assert run.result["completion"] == "all_completed"
    assert ev.STEP_STOPPED not in run.event_types
    settled = next(e for e in run.events if e.type == ev.CHILDREN_SETTLED)
    assert settled.payload["completion"] == "all_completed"


def test_over_fewer_items_than_min_successful_the_run_fails_at_once(env: WorkflowTestEnv) -> None:
    go(env, "quorum", item(1))
    run = parent(env, "quorum")
    assert (run.status, run.reason) == ("failed", "failure_tolerance_exceeded")
    assert kids(env) == {}


def test_a_map_over_nothing_with_a_policy_yields_an_empty_batch(env: WorkflowTestEnv) -> None:
    go(env, "everything")
    assert parent(env, "everything").result == {
        "results": [],
        "failures": [],
        "succeeded": 0,
        "failed": 0,
        "completion": "all_completed",
    }


def test_without_a_policy_a_failure_stops_the_running_children_at_once(
    env: WorkflowTestEnv,
) -> None:
    go(env, "fast-fail", item(1, bad=True), item(10), item(10))
    env.advance("PT1M")
    run = parent(env, "fast-fail")
    assert (run.status, run.reason) == ("failed", "child_failed")
    assert stopped(run)["reason"] == "child_failed"
    assert stopped(run)["cancelled"] == [1, 2]
    children = kids(env)
    assert [children[i].status for i in (1, 2)] == ["cancelled", "cancelled"]
    stop_at = next(e for e in run.events if e.type == ev.STEP_STOPPED).version
    told_at = next(e for e in run.events if e.type == ev.CHILDREN_SETTLED).version
    assert stop_at + 1 == told_at  # stopped in the count, before the parent resumed


def test_the_stop_leaves_a_child_another_parent_waits_for(env: WorkflowTestEnv) -> None:
    env.put_event(
        tenant=TENANT_A, type="caller.go", payload={"id": "c1", "input": item(5, key="shared")}
    )
    go(env, "quorum", item(1), item(5, key="shared"), item(1))
    env.advance("PT1M")  # items 0 and 2 succeed: the map stops
    run = parent(env, "quorum")
    assert run.status == "completed"
    assert stopped(run)["kept"] == [1]
    assert run.result["results"] == [{"i": 0}, None, {"i": 2}]
    env.advance("PT4M")
    caller = env.run(tenant=TENANT_A, workflow="caller", key="c1")
    assert caller.status == "completed"  # the shared child ran on for its other parent


def test_a_child_knows_its_item_index_in_its_steps_and_its_tasks(env: WorkflowTestEnv) -> None:
    env.put_event(tenant=TENANT_A, type="indexed.go", payload={"id": "m1", "items": [{}, {}, {}]})
    env.advance("PT1S")
    assert parent(env, "indexed").result == [{"index": 0}, {"index": 1}, {"index": 2}]
    assert sorted(SEEN_BY_TASKS) == [0, 1, 2]
    [child] = [
        r
        for r in env.runs(tenant=TENANT_A, workflow="tasked")
        if r.events[0].payload["mapIndex"] == 1
    ]
    assert child.events[0].payload["triggerEventType"] == "workflow.call"
    assert "(map item 1)" in child.events[0].text
