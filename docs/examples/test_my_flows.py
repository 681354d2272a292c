import pytest
from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"
ORDER = {"orderId": "o-1", "email": "ada@example.com", "total": 30}


@pytest.fixture
def env():
    with WorkflowTestEnv(modules=["my_flows"], now="2030-01-01T09:00:00Z") as env:
        yield env


def test_an_approved_order_is_fulfilled(env):
    env.put_event(tenant=TENANT, type="order.placed", payload=ORDER)
    assert env.run(tenant=TENANT, workflow="order-approval", key="o-1").status == "waiting"
    assert [m.subject for m in env.mails] == ["Thanks"]

    env.advance("PT1H")
    env.put_event(tenant=TENANT, type="order.approved", payload={"orderId": "o-1", "by": "bo"})

    run = env.run(tenant=TENANT, workflow="order-approval", key="o-1")
    assert run.status == "completed"
    assert run.steps["order.approved"]["by"] == "bo"
    assert [w.body for w in env.webhooks] == [{"orderId": "o-1"}]


def test_an_order_nobody_approves_fails_after_three_days(env):
    env.put_event(tenant=TENANT, type="order.placed", payload=ORDER)
    env.advance("P3D")
    run = env.run(tenant=TENANT, workflow="order-approval", key="o-1")
    assert (run.status, run.reason) == ("failed", "returned_failure")
    assert env.webhooks == []


def test_the_fulfilment_call_is_retried_until_it_succeeds(env):
    env.stub_webhook("https://hooks.example.com/fulfil", 503, 503, 200)
    env.put_event(tenant=TENANT, type="order.placed", payload=ORDER)
    env.put_event(tenant=TENANT, type="order.approved", payload={"orderId": "o-1"})
    env.advance("PT10M")
    assert [w.status for w in env.webhooks] == [503, 503, 200]
