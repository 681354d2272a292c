from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"


def test_every_order_of_the_batch_is_fulfilled_by_a_child_run():
    orders = [{"orderId": f"o-{n}"} for n in range(8)]
    with WorkflowTestEnv(modules=["batch"]) as env:
        env.put_event(
            tenant=TENANT, type="batch.submitted", payload={"batchId": "b-1", "orders": orders}
        )
        env.advance("PT1M")
        run = env.run(tenant=TENANT, workflow="batch-fulfilment", key="b-1")
        assert run.status == "completed"
        assert run.result["orders"][0] == {"orderId": "o-0", "reservation": "r-o-0"}
        assert len(run.result["orders"]) == 8
        children = env.runs(tenant=TENANT, workflow="fulfil-order")
        assert len(children) == 8 and {c.status for c in children} == {"completed"}


def test_a_failed_child_holds_its_place_and_the_others_go_on():
    def reserve(ctx):
        if ctx.event.payload["orderId"] == "o-1":
            raise LookupError("out of stock")
        return {"reservation": "ok"}

    orders = [{"orderId": "o-0"}, {"orderId": "o-1"}, {"orderId": "o-2"}]
    with WorkflowTestEnv(modules=["batch"]) as env:
        env.stub_task("stock", reserve, workflow="fulfil-order")
        env.put_event(
            tenant=TENANT, type="batch.submitted", payload={"batchId": "b-2", "orders": orders}
        )
        env.advance("PT10M")
        run = env.run(tenant=TENANT, workflow="batch-fulfilment", key="b-2")
        assert run.status == "completed"
        failed = run.result["orders"][1]
        assert failed["failed"] is True and failed["reason"] == "task_failed"
        assert run.result["orders"][2] == {"orderId": "o-2", "reservation": "ok"}
