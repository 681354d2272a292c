from workflow_runner import Event, define_workflow, on_event
from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"

# What was deployed when the runs started: the same workflow with the old subject.
before = define_workflow(
    name="trial-reminder",
    trigger=on_event("trial.started"),
    idempotency_key=Event.payload["accountId"],
    steps=lambda s: [
        s.wait(for_="P11D"),
        s.mail_send(to=Event.payload["email"], subject="Trial ends soon", body="Upgrade soon."),
        s.return_({"isSuccess": True}),
    ],
    register=False,
)


def test_a_copy_edit_deployed_mid_wait_reaches_the_waiting_runs():
    with WorkflowTestEnv(workflows=[before]) as env:
        env.put_event(
            tenant=TENANT, type="trial.started", payload={"accountId": "a-1", "email": "a@x.io"}
        )
        assert env.redeploy(modules=["trial_reminder"]) == []  # nothing would fail

        env.advance("P11D")
        run = env.run(tenant=TENANT, workflow="trial-reminder", key="a-1")
        assert run.status == "completed"
        assert [m.subject for m in env.mails] == ["Your trial ends in 3 days"]
