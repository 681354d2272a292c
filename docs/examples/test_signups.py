from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"


def test_a_burst_of_signups_calls_the_provider_at_its_pace():
    with WorkflowTestEnv(modules=["signups"]) as env:
        for n in range(30):
            env.put_event(
                tenant=TENANT,
                type="user.signed-up",
                payload={"userId": f"u{n}", "accountId": "acme"},
            )

        def done():
            runs = env.runs(tenant=TENANT, workflow="signup")
            return sum(r.status == "completed" for r in runs)

        assert done() == 1  # the first call at once, the others wait their turn
        env.advance("PT1M")
        assert done() == 11  # one turn every 6 s: none dropped, none early
        env.advance("PT2M")
        assert done() == 30


def test_another_account_is_not_held_back():
    with WorkflowTestEnv(modules=["signups"]) as env:
        for n in range(5):
            env.put_event(
                tenant=TENANT,
                type="user.signed-up",
                payload={"userId": f"a{n}", "accountId": "acme"},
            )
        env.put_event(
            tenant=TENANT, type="user.signed-up", payload={"userId": "b0", "accountId": "globex"}
        )
        assert env.run(tenant=TENANT, workflow="signup", key="b0").status == "completed"
