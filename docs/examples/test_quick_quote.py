from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"


def answering(price):
    def quote(ctx):
        return {"carrier": ctx.workflow.task_key, "price": price}

    return quote


def down(ctx):
    raise ConnectionError("carrier unreachable")


def test_one_carrier_down_is_tolerated_and_listed_among_the_failures():
    with WorkflowTestEnv(modules=["quick_quote"]) as env:
        env.stub_task("parcelco", lambda ctx: {"carrier": "parcelco", "price": 12})
        env.stub_task("fastship", lambda ctx: {"carrier": "fastship", "price": 9})
        env.stub_task("slowpost", down)
        env.put_event(tenant=TENANT, type="parcel.ready", payload={"parcelId": "p-1"})
        env.advance("PT1M")
        run = env.run(tenant=TENANT, workflow="quick-quote", key="p-1")
        assert run.result == {"isSuccess": True, "carrier": "fastship"}
        [failure] = run.steps["quotes"]["failures"]
        assert (failure["index"], failure["taskKey"]) == (2, "slowpost")
        assert failure["error"] == "ConnectionError"  # tried twice: it is in retry_on


def test_two_carriers_down_fail_the_run():
    with WorkflowTestEnv(modules=["quick_quote"]) as env:
        env.stub_task("parcelco", down)
        env.stub_task("fastship", down)
        env.put_event(tenant=TENANT, type="parcel.ready", payload={"parcelId": "p-2"})
        env.advance("PT1M")
        run = env.run(tenant=TENANT, workflow="quick-quote", key="p-2")
        assert (run.status, run.reason) == ("failed", "failure_tolerance_exceeded")
