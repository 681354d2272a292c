"""Children that more than one run depends on (issue 30, defect 2): two parents calling
the same child key, and a call that attaches to a run an event started. A cancel
cascades only to a child no other open join and no independent start owns."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from workflow_runner import Event, Steps, define_workflow, on_call, on_event
from workflow_runner.definition import WorkflowDefinition
from workflow_runner.engine.cancel import cancel_run
from workflow_runner.testing import WorkflowTestEnv

from tests.support import TENANT_A

T0 = "2030-01-01T09:00:00Z"
MakeEnv = Callable[..., WorkflowTestEnv]


def workflows() -> list[WorkflowDefinition]:
    double = define_workflow(
        name="double",
        trigger=on_call(),
        steps=lambda s: [
            s.wait(for_="PT1M"),
            s.return_(lambda ctx: {"n": ctx.event.payload["n"] * 2}),
        ],
        register=False,
    )
    # A workflow events start, which a call may also name by its key.
    solo = define_workflow(
        name="solo",
        trigger=on_event("solo.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [s.wait(for_="PT1M"), s.return_({"solo": Event.payload["id"]})],
        register=False,
    )

    def caller(name: str, child: str) -> WorkflowDefinition:
        return define_workflow(
            name=name,
            trigger=on_event(f"{name}.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.call_workflow(
                    child, input={"n": 21}, key=Event.payload["key"], result_key="child"
                ),
                s.return_({"isSuccess": True, "child": Steps["child"]}),
            ],
            register=False,
        )

    starter = define_workflow(
        name="starter",
        trigger=on_event("starter.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.start_workflow("double", input={"n": 1}, key=Event.payload["key"]),
            s.wait(for_="P1D"),
            s.return_({"isSuccess": True}),
        ],
        register=False,
    )
    return [double, solo, caller("call-double", "double"), caller("call-solo", "solo"), starter]


@pytest.fixture
def env(make_env: MakeEnv) -> WorkflowTestEnv:
    return make_env(workflows=workflows(), now=T0)


def go(env: WorkflowTestEnv, workflow: str, **payload: object) -> None:
    env.put_event(tenant=TENANT_A, type=f"{workflow}.go", payload=payload)


def status(env: WorkflowTestEnv, workflow: str, key: str) -> str:
    return env.run(tenant=TENANT_A, workflow=workflow, key=key).status


def cancel(env: WorkflowTestEnv, workflow: str, key: str) -> None:
    run = env.run(tenant=TENANT_A, workflow=workflow, key=key)
    cancel_run(env.store, TENANT_A, run.run_id, env.now, "not needed")
    env.runtime.catch_up()


def test_cancelling_one_of_two_parents_leaves_their_shared_child_to_the_other(
    env: WorkflowTestEnv,
) -> None:
    go(env, "call-double", id="p1", key="shared")
    go(env, "call-double", id="p2", key="shared")
    assert len(env.runs(tenant=TENANT_A, workflow="double")) == 1
    cancel(env, "call-double", "p1")
    assert status(env, "double", "shared") == "waiting"
    env.advance("PT1M")
    p2 = env.run(tenant=TENANT_A, workflow="call-double", key="p2")
    assert (p2.status, p2.result) == ("completed", {"isSuccess": True, "child": {"n": 42}})
    assert status(env, "call-double", "p1") == "cancelled"


def test_the_last_parent_cancelled_cancels_the_shared_child(env: WorkflowTestEnv) -> None:
    go(env, "call-double", id="p1", key="shared")
    go(env, "call-double", id="p2", key="shared")
    cancel(env, "call-double", "p1")
    cancel(env, "call-double", "p2")
    assert status(env, "double", "shared") == "cancelled"


def test_cancelling_a_parent_never_cancels_a_run_an_event_started(env: WorkflowTestEnv) -> None:
    go(env, "solo", id="k1")
    go(env, "call-solo", id="p1", key="k1")
    parent = env.run(tenant=TENANT_A, workflow="call-solo", key="p1")
    assert (
        parent.events[1].payload["childRunId"]
        == env.run(tenant=TENANT_A, workflow="solo", key="k1").run_id
    )  # the call attached to the run the event started
    cancel(env, "call-solo", "p1")
    assert status(env, "solo", "k1") == "waiting"
    env.advance("PT1M")
    assert status(env, "solo", "k1") == "completed"


def test_cancelling_a_caller_never_cancels_a_child_a_start_workflow_also_owns(
    env: WorkflowTestEnv,
) -> None:
    go(env, "starter", id="s1", key="k1")  # fire and forget: the child outlives it
    go(env, "call-double", id="p1", key="k1")
    cancel(env, "call-double", "p1")
    assert status(env, "double", "k1") == "waiting"
    env.advance("PT1M")
    assert status(env, "double", "k1") == "completed"
