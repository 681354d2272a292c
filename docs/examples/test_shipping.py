from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"
ORDER = {"orderId": "o-1", "email": "ada@example.com"}


def test_both_quotes_are_asked_at_once_and_the_cheapest_carrier_is_booked():
    with WorkflowTestEnv(modules=["shipping"]) as env:
        env.stub_task("parcelco", lambda ctx: {"carrier": "parcelco", "price": 12})
        env.stub_task("fastship", lambda ctx: {"carrier": "fastship", "price": 9})
        env.put_event(tenant=TENANT, type="order.packed", payload=ORDER)
        env.advance("PT1M")

        run = env.run(tenant=TENANT, workflow="shipping", key="o-1")
        assert run.steps["quotes"] == [
            {"carrier": "parcelco", "price": 12},
            {"carrier": "fastship", "price": 9},
        ]
        assert run.result == {"isSuccess": True, "booking": {"booked": "fastship"}}
        # The fire-and-forget child ran on its own and mailed the customer.
        [notify] = env.runs(tenant=TENANT, workflow="notify-customer")
        assert notify.status == "completed"
        assert [m.subject for m in env.mails] == ["Your parcel is booked"]
