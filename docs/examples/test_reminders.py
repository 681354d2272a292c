from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"


def test_a_paid_order_gets_no_reminder():
    with WorkflowTestEnv(modules=["reminders"]) as env:
        for order in ("o-1", "o-2"):
            env.put_event(
                tenant=TENANT,
                type="order.placed",
                payload={"orderId": order, "email": "ada@example.com"},
            )
        env.advance("PT2H")
        env.put_event(tenant=TENANT, type="order.paid", payload={"orderId": "o-1"})
        env.advance("P1D")
        paid = env.run(tenant=TENANT, workflow="payment-reminder", key="o-1")
        assert paid.status == "cancelled"  # by the order.paid event, its reason says
        assert env.run(tenant=TENANT, workflow="payment-reminder", key="o-2").status == "completed"
        assert len(env.mails) == 1
