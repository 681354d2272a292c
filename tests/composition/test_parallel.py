"""`s.parallel`: tasks scheduled together, joined when all have settled (real
PostgreSQL, through the handlers)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from workflow_runner import Event, RetryPolicy, StepContext, Steps, define_workflow, on_event
from workflow_runner import stream as ev
from workflow_runner.errors import WorkflowDefinitionError
from workflow_runner.testing import WorkflowTestEnv

from tests.support import TENANT_A

T0 = "2030-01-01T09:00:00Z"
MakeEnv = Callable[..., WorkflowTestEnv]
ONCE = RetryPolicy(max_attempts=1)


class Declined(Exception):
    pass


def price(ctx: StepContext) -> dict[str, int]:
    return {"price": 10 * ctx.event.payload["qty"]}


def stock(ctx: StepContext) -> dict[str, bool]:
    return {"inStock": True}


def decline(ctx: StepContext) -> None:
    raise Declined("card declined")


def quote(catch: bool = False) -> list[object]:
    return [
        define_workflow(
            name="quote",
            trigger=on_event("quote.asked"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.parallel(
                    s.task("price", price, retry=ONCE),
                    s.task("stock", stock, retry=ONCE),
                    s.webhook_send(
                        url="https://partner.example.com/quote",
                        body=Event.payload,
                        result_key="partner",
                    ),
                    result_key="all",
                ),
                s.return_(
                    lambda ctx: {
                        "price": ctx.steps["price"]["price"],
                        "stock": ctx.steps["stock"]["inStock"],
                        "partner": ctx.steps["partner"]["status"],
                        "n": len(ctx.steps["all"]),
                    }
                ),
            ],
            register=False,
        ),
        define_workflow(
            name="pay",
            trigger=on_event("pay.asked"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.parallel(
                    s.task("charge", decline, retry=ONCE, catch=catch),
                    s.task("price", price, retry=ONCE),
                ),
                s.return_({"isSuccess": True, "charge": Steps["charge"]}),
            ],
            register=False,
        ),
    ]


@pytest.fixture
def env(make_env: MakeEnv) -> WorkflowTestEnv:
    return make_env(workflows=quote(), now=T0)


def test_parallel_tasks_all_run_and_the_run_goes_on_with_every_result(
    env: WorkflowTestEnv,
) -> None:
    env.put_event(tenant=TENANT_A, type="quote.asked", payload={"id": "q1", "qty": 3})
    run = env.run(tenant=TENANT_A, workflow="quote", key="q1")
    assert run.status == "completed"
    assert run.result == {"price": 30, "stock": True, "partner": 200, "n": 3}
    assert run.steps["all"][0] == {"price": 30}
    assert run.event_types.count(ev.TASK_COMPLETED) == 3
    assert run.event_types.count(ev.STEP_RESUMED) == 1  # one join, one resume
    scheduled = run.events[1].payload
    assert [t["taskKey"] for t in scheduled["tasks"]] == ["price", "stock", "partner"]
    [hook] = env.webhooks
    assert hook.url == "https://partner.example.com/quote"


def test_the_run_waits_until_the_last_task_has_settled(env: WorkflowTestEnv) -> None:
    env.stub_webhook("https://partner.example.com/quote", 503, 200)
    env.put_event(tenant=TENANT_A, type="quote.asked", payload={"id": "q1", "qty": 1})
    run = env.run(tenant=TENANT_A, workflow="quote", key="q1")
    assert run.status == "waiting"  # price and stock done; the partner retries
    completed = [e.payload for e in run.events if e.type == ev.TASK_COMPLETED]
    assert all(p["runDue"] is False for p in completed)
    env.advance("PT1M")
    run = env.run(tenant=TENANT_A, workflow="quote", key="q1")
    assert run.status == "completed" and run.result["partner"] == 200


def test_an_uncaught_failure_fails_the_run_at_once(env: WorkflowTestEnv) -> None:
    env.put_event(tenant=TENANT_A, type="pay.asked", payload={"id": "p1", "qty": 1})
    run = env.run(tenant=TENANT_A, workflow="pay", key="p1")
    assert (run.status, run.reason) == ("failed", "task_failed")
    assert run.error == "workflow step failed (Declined)"


def test_a_caught_failure_lands_under_its_key(make_env: MakeEnv) -> None:
    env = make_env(workflows=quote(catch=True), now=T0)
    env.put_event(tenant=TENANT_A, type="pay.asked", payload={"id": "p1", "qty": 1})
    run = env.run(tenant=TENANT_A, workflow="pay", key="p1")
    assert run.status == "completed"
    assert run.result["charge"] == {"failed": True, "error": "Declined", "attempts": 1}


def test_stub_task_reaches_tasks_inside_parallel(env: WorkflowTestEnv) -> None:
    env.stub_task("price", lambda ctx: {"price": 1})
    env.put_event(tenant=TENANT_A, type="quote.asked", payload={"id": "q1", "qty": 3})
    assert env.run(tenant=TENANT_A, workflow="quote", key="q1").result["price"] == 1


def test_parallel_takes_only_tasks() -> None:
    with pytest.raises(WorkflowDefinitionError, match="parallel"):
        define_workflow(
            name="bad",
            trigger=on_event("x"),
            steps=lambda s: [s.parallel(s.wait(for_="PT1M"))],
            register=False,
        )
    with pytest.raises(WorkflowDefinitionError, match="already written"):
        define_workflow(
            name="twice",
            trigger=on_event("x"),
            steps=lambda s: [s.parallel(s.task("a", price), s.task("a", stock))],
            register=False,
        )
