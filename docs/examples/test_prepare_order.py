from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"
ORDER = {"orderId": "o-1", "total": 40}


def test_the_branches_run_at_once_and_their_results_come_in_branch_order():
    with WorkflowTestEnv(modules=["prepare_order"]) as env:
        env.put_event(tenant=TENANT, type="order.placed", payload=ORDER)
        env.advance("PT1M")
        run = env.run(tenant=TENANT, workflow="prepare-order", key="o-1")
        assert run.status == "waiting"  # the charge waits out its window
        env.advance("PT2H")
        run = env.run(tenant=TENANT, workflow="prepare-order", key="o-1")
        assert run.steps["prepared"] == [
            "north",
            {"charged": 40},
            {"risk": "low", "orderId": "o-1"},
        ]
        assert run.result == {
            "isSuccess": True,
            "warehouse": "north",
            "charge": {"charged": 40},
            "fraud": "low",
        }


def test_a_failing_branch_fails_the_run_and_stops_the_others():
    def declined(ctx):
        raise RuntimeError("card declined")

    with WorkflowTestEnv(modules=["prepare_order"]) as env:
        env.stub_task("reserve", declined)
        env.put_event(tenant=TENANT, type="order.placed", payload=ORDER)
        env.advance("PT1M")  # three attempts, a second or so apart
        run = env.run(tenant=TENANT, workflow="prepare-order", key="o-1")
        assert (run.status, run.reason) == ("failed", "child_failed")
        # The charge's branch was waiting: it is cancelled, and never charges.
        charge = env.run(tenant=TENANT, workflow="prepare-order/0/branch-1")
        assert charge.status == "cancelled"
