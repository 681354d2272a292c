from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"


def test_usage_is_billed_per_hundred_events_or_per_hour():
    with WorkflowTestEnv(modules=["usage_billing"]) as env:
        for _ in range(130):
            env.put_event(
                tenant=TENANT, type="usage.recorded", payload={"customerId": "c1", "units": 2}
            )
        runs = env.runs(tenant=TENANT, workflow="usage-billing")
        assert sorted(r.status for r in runs) == ["completed", "waiting"]
        assert [r.result for r in runs if r.status == "completed"] == [
            {"customer": "c1", "units": 200}
        ]
        env.advance("PT1H")  # the other 30 are billed when the hour since their first ends
        runs = env.runs(tenant=TENANT, workflow="usage-billing")
        assert sorted(r.result["units"] for r in runs) == [60, 200]
