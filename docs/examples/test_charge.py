from my_app.payments import CardDeclined
from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"


def test_a_declined_card_is_not_retried_and_the_run_goes_on():
    attempts = []

    def provider(ctx):
        attempts.append(ctx.workflow.retry_attempt)
        raise CardDeclined("insufficient funds")

    with WorkflowTestEnv(modules=["charge"]) as env:
        env.stub_task("charge", provider)
        env.put_event(tenant=TENANT, type="order.confirmed", payload={"orderId": "o-1"})
        env.advance("PT1M")
        run = env.run(tenant=TENANT, workflow="checkout", key="o-1")
        assert attempts == [1]
        assert run.steps["charge"] == {"failed": True, "error": "CardDeclined", "attempts": 1}
        assert run.result == {"isSuccess": False, "error": "payment failed"}


def test_a_flaky_provider_is_retried_with_the_same_task_key():
    keys = []

    def provider(ctx):
        keys.append(ctx.workflow.task_key)
        if len(keys) < 3:
            raise ConnectionError("provider down")
        return {"chargeId": "ch-1"}

    with WorkflowTestEnv(modules=["charge"]) as env:
        env.stub_task("charge", provider)
        env.put_event(tenant=TENANT, type="order.confirmed", payload={"orderId": "o-2"})
        env.advance("PT10M")
        run = env.run(tenant=TENANT, workflow="checkout", key="o-2")
        assert len(keys) == 3 and len(set(keys)) == 1
        assert run.result == {"isSuccess": True, "charge": {"chargeId": "ch-1"}}
