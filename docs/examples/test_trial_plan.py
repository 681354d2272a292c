from workflow_runner import Event, define_workflow, on_event
from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"
STARTED = {"accountId": "a-1", "email": "a@x.io"}

# What was deployed when the run started: no "plan" step before the wait.
before = define_workflow(
    name="trial-plan",
    trigger=on_event("trial.started"),
    idempotency_key=Event.payload["accountId"],
    steps=lambda s: [
        s.wait(for_="P14D"),
        s.mail_send(to=Event.payload["email"], subject="Your trial has ended", body="-"),
        s.return_({"plan": "basic"}),
    ],
    register=False,
)


def test_a_structural_edit_leaves_the_run_on_the_code_it_started_on():
    with WorkflowTestEnv(workflows=[before]) as env:
        env.put_event(tenant=TENANT, type="trial.started", payload=STARTED)
        assert env.redeploy(modules=["trial_plan"]) == []  # nothing fails

        [pinned] = env.pinned_definitions()
        assert (pinned.kept, pinned.kept_on) == (1, ("the code before redeploy 1",))
        env.advance("P14D")
        run = env.run(tenant=TENANT, workflow="trial-plan", key="a-1")
        assert (run.status, run.result) == ("completed", {"plan": "basic"})  # the old code


def test_once_that_code_is_gone_the_run_fails_loud():
    with WorkflowTestEnv(workflows=[before]) as env:
        env.put_event(tenant=TENANT, type="trial.started", payload=STARTED)
        [failing] = env.redeploy(modules=["trial_plan"], keep_previous=False)
        assert failing.failing == 1

        env.advance("P14D")
        run = env.run(tenant=TENANT, workflow="trial-plan", key="a-1")
        assert (run.status, run.reason) == ("failed", "workflow_definition_changed")
        assert "step 0 (wait): wait → compute" in run.error
