"""A redrive repeats no recorded effect (issue 30, defects 3 and 4): children started
without waiting keep their ids, a callback's answer and an awaited event are read back,
a task that completed is not run again, children that completed keep their results.
What failed runs again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from workflow_runner import Event, RetryPolicy, Steps, define_workflow, on_call, on_event
from workflow_runner.definition import WorkflowDefinition
from workflow_runner.engine.redrive import redrive_run
from workflow_runner.match import eq
from workflow_runner.testing import WorkflowTestEnv

from tests.support import TENANT_A

T0 = "2030-01-01T09:00:00Z"
MakeEnv = Callable[..., WorkflowTestEnv]

BROKEN = {"after": True, "kid": True}
CHARGES: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    BROKEN.update(after=True, kid=True)
    CHARGES.clear()


def after(ctx: Any) -> int:
    if BROKEN["after"]:
        raise RuntimeError("a bug, fixed before the redrive")
    return 1


def charge(ctx: Any) -> dict[str, str]:
    CHARGES.append(ctx.workflow.task_key)
    return {"charged": ctx.workflow.task_key}


def flaky_charge(ctx: Any) -> dict[str, str]:
    if BROKEN["after"]:
        raise RuntimeError("the provider is down")
    return charge(ctx)


def kid_ok(ctx: Any) -> bool:
    return not (ctx.event.payload.get("bad") and BROKEN["kid"])


def workflows(subject: str = "Approve?") -> list[WorkflowDefinition]:
    double = define_workflow(
        name="double",
        trigger=on_call(),
        steps=lambda s: [s.wait(for_="PT1M"), s.return_({"n": Event.payload["n"]})],
        register=False,
    )
    spawner = define_workflow(
        name="spawner",
        trigger=on_event("spawner.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.start_workflow("double", input={"n": 1}),
            s.mail_send(to="ops@example.com", subject="started", body="a child is on its way"),
            s.compute("after", after),
            s.return_({"isSuccess": True}),
        ],
        register=False,
    )
    payer = define_workflow(
        name="payer",
        trigger=on_event("payer.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.task("charge", charge),
            s.compute("after", after),
            s.return_({"isSuccess": True, "charge": Steps["charge"]}),
        ],
        register=False,
    )
    approver = define_workflow(
        name="approver",
        pinning="exact",  # a copy edit fails its waiting runs
        trigger=on_event("approver.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.mail_send(
                to="boss@example.com", subject=subject, body=lambda ctx: ctx.callback.token
            ),
            s.wait_for_callback("answer", timeout="P1D"),
            s.return_({"isSuccess": True, "answer": Steps["answer"]}),
        ],
        register=False,
    )
    listener = define_workflow(
        name="listener",
        trigger=on_event("listener.go"),
        idempotency_key=Event.payload["id"],
        awaits={"paid": "order.paid"},
        steps=lambda s: [
            s.wait_for_event("paid", match=eq("id", Event.payload["id"]), timeout="P1D"),
            s.compute("after", after),
            s.return_({"isSuccess": True, "paid": Steps["order.paid"]}),
        ],
        register=False,
    )
    picky = define_workflow(
        name="picky",
        trigger=on_call(),
        steps=lambda s: [
            s.wait(for_="PT1M"),
            s.branch(
                if_=kid_ok,
                on_true=[s.return_({"n": Event.payload["n"]})],
                on_false=[s.compute("boom", after)],
            ),
        ],
        register=False,
    )
    mapper = define_workflow(
        name="mapper",
        trigger=on_event("mapper.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.map(Event.payload["items"], workflow="picky", concurrency=10, result_key="all"),
            s.return_({"isSuccess": True, "all": Steps["all"]}),
        ],
        register=False,
    )
    both = define_workflow(
        name="both",
        trigger=on_event("both.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.parallel(
                s.task("first", charge, retry=RetryPolicy(max_attempts=1)),
                s.task("second", flaky_charge, retry=RetryPolicy(max_attempts=1)),
                result_key="all",
            ),
            s.return_({"isSuccess": True, "all": Steps["all"]}),
        ],
        register=False,
    )
    return [double, spawner, payer, approver, listener, picky, mapper, both]


@pytest.fixture
def env(make_env: MakeEnv) -> WorkflowTestEnv:
    return make_env(workflows=workflows(), now=T0)


def go(env: WorkflowTestEnv, workflow: str, **payload: object) -> str:
    env.put_event(tenant=TENANT_A, type=f"{workflow}.go", payload=payload)
    return env.run(tenant=TENANT_A, workflow=workflow, key=str(payload["id"])).run_id


def redrive(env: WorkflowTestEnv, run_id: str) -> None:
    BROKEN.update(after=False, kid=False)
    redrive_run(env.store, TENANT_A, run_id, env.now, registry=env.registry)
    env.runtime.catch_up()


def test_a_redrive_starts_no_fire_and_forget_child_a_second_time(env: WorkflowTestEnv) -> None:
    run_id = go(env, "spawner", id="s1")
    assert env.run(tenant=TENANT_A, workflow="spawner", run_id=run_id).status == "failed"
    redrive(env, run_id)
    assert env.run(tenant=TENANT_A, workflow="spawner", run_id=run_id).status == "completed"
    assert len(env.runs(tenant=TENANT_A, workflow="double")) == 1
    assert len(env.mails) == 1


def test_a_redrive_does_not_run_a_completed_task_again(env: WorkflowTestEnv) -> None:
    run_id = go(env, "payer", id="p1")
    env.advance("PT1S")
    assert env.run(tenant=TENANT_A, workflow="payer", run_id=run_id).status == "failed"
    assert len(CHARGES) == 1
    redrive(env, run_id)
    run = env.run(tenant=TENANT_A, workflow="payer", run_id=run_id)
    assert run.status == "completed"
    assert len(CHARGES) == 1  # the customer is charged once
    assert run.result == {"isSuccess": True, "charge": {"charged": CHARGES[0]}}


def test_a_redrive_after_an_in_place_edit_keeps_the_callbacks_answer(
    env: WorkflowTestEnv,
) -> None:
    run_id = go(env, "approver", id="a1")
    [mail] = env.mails
    # Edited in place, and the old code not kept: the run fails when it resumes.
    env.redeploy(workflows=workflows(subject="Please approve"), keep_previous=False)
    env.complete_callback(mail.body, {"approved": True})
    run = env.run(tenant=TENANT_A, workflow="approver", run_id=run_id)
    assert (run.status, run.reason) == ("failed", "workflow_definition_changed")
    redrive(env, run_id)
    run = env.run(tenant=TENANT_A, workflow="approver", run_id=run_id)
    assert run.status == "completed"
    assert run.result == {"isSuccess": True, "answer": {"approved": True}}


def test_a_redrive_reads_the_awaited_event_back(env: WorkflowTestEnv) -> None:
    run_id = go(env, "listener", id="l1")
    env.put_event(tenant=TENANT_A, type="order.paid", payload={"id": "l1", "amount": 5})
    assert env.run(tenant=TENANT_A, workflow="listener", run_id=run_id).status == "failed"
    redrive(env, run_id)
    run = env.run(tenant=TENANT_A, workflow="listener", run_id=run_id)
    assert run.status == "completed"
    assert run.result["paid"]["amount"] == 5


def test_a_redrive_keeps_the_children_that_completed_and_redrives_the_failed_one(
    env: WorkflowTestEnv,
) -> None:
    items = [{"n": 0}, {"n": 1, "bad": True}, {"n": 2}]
    run_id = go(env, "mapper", id="m1", items=items)
    env.advance("PT1M")
    parent = env.run(tenant=TENANT_A, workflow="mapper", run_id=run_id)
    assert (parent.status, parent.reason) == ("failed", "child_failed")
    kids = {r.run_id: r.status for r in env.runs(tenant=TENANT_A, workflow="picky")}
    assert sorted(kids.values()) == ["completed", "completed", "failed"]
    redrive(env, run_id)
    env.advance("PT1M")
    parent = env.run(tenant=TENANT_A, workflow="mapper", run_id=run_id)
    assert parent.status == "completed"
    assert parent.result["all"] == [{"n": 0}, {"n": 1}, {"n": 2}]
    after_redrive = {r.run_id: r.status for r in env.runs(tenant=TENANT_A, workflow="picky")}
    assert set(after_redrive) == set(kids)  # the same three child runs, none new
    assert set(after_redrive.values()) == {"completed"}


def test_a_redrive_runs_again_only_the_parallel_tasks_that_failed(env: WorkflowTestEnv) -> None:
    run_id = go(env, "both", id="b1")
    env.advance("PT1S")
    run = env.run(tenant=TENANT_A, workflow="both", run_id=run_id)
    assert (run.status, run.reason) == ("failed", "task_failed")
    # "second" failed before charging; "first" charged if the worker ran it first, else
    # the failure stopped it before it ran (fail fast).
    assert len(CHARGES) <= 1
    redrive(env, run_id)
    env.advance("PT1S")
    run = env.run(tenant=TENANT_A, workflow="both", run_id=run_id)
    assert run.status == "completed"
    assert len(CHARGES) == 2  # each charged once: a "first" that had completed did not run again
    first, second = run.result["all"]
    assert sorted([first["charged"], second["charged"]]) == sorted(CHARGES)
