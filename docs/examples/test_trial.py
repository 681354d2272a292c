from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"
ACCOUNT = {"accountId": "a-1", "email": "ada@example.com"}


def test_the_reminder_goes_out_on_the_thirteenth_day():
    with WorkflowTestEnv(modules=["my_workflows.trial"]) as env:
        env.put_event(tenant=TENANT, type="trial.started", payload=ACCOUNT)
        env.advance("P12D")
        assert env.mails == []
        env.advance("P1D")
        assert [m.subject for m in env.mails] == ["Your trial ends tomorrow"]
        assert env.run(tenant=TENANT, workflow="trial-ending", key="a-1").status == "completed"
