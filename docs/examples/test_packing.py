from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"
ORDER = {
    "orderId": "o-1",
    "email": "ada@example.com",
    "lines": [{"sku": "mug", "qty": 2, "price": 30}, {"sku": "tea", "qty": 1, "price": 50}],
}


def test_each_line_is_picked_and_the_courier_is_booked_when_it_opens():
    with WorkflowTestEnv(modules=["packing"], now="2030-01-01T07:30:00Z") as env:
        env.put_event(tenant=TENANT, type="order.paid", payload=ORDER)
        assert env.run(tenant=TENANT, workflow="packing", key="o-1").status == "waiting"

        env.advance("PT3H")

        run = env.run(tenant=TENANT, workflow="packing", key="o-1")
        assert run.result == {
            "isSuccess": True,
            "total": 110,
            "courier": {"booked": "2030-01-01T09:30:00+00:00", "attempt": 3},
        }
        assert [m.subject for m in env.mails] == [
            "Pick 2 × mug",
            "Pick 1 × tea",
            "A gift is on its way",
        ]
        assert run.event_types.count("workflow.retry.scheduled") == 2
