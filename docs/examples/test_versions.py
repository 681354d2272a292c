from versions import order_approval_v1
from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"


def test_adding_version_2_keeps_the_runs_of_version_1_going():
    # Deployed before: only version 1. One run waits for its approval.
    with WorkflowTestEnv(workflows=[order_approval_v1]) as env:
        env.put_event(tenant=TENANT, type="order.placed", payload={"orderId": "o-1"})

        # The deploy of versions.py fails no waiting run (what `wfr doctor` checks).
        assert env.redeploy(modules=["versions"]) == []

        env.put_event(tenant=TENANT, type="order.placed", payload={"orderId": "o-2"})
        env.put_event(tenant=TENANT, type="order.approved", payload={"orderId": "o-1"})
        old = env.run(tenant=TENANT, workflow="order-approval", key="o-1")
        new = env.run(tenant=TENANT, workflow="order-approval", key="o-2")
        assert old.status == "completed"
        assert old.definition_fingerprint == order_approval_v1.fingerprint
        assert new.definition_fingerprint != order_approval_v1.fingerprint
        assert new.wake_at is not None and (new.wake_at - env.now).days == 5


def test_editing_a_version_in_place_fails_its_waiting_runs_once_the_old_code_is_gone():
    with WorkflowTestEnv(workflows=[order_approval_v1]) as env:
        env.put_event(tenant=TENANT, type="order.placed", payload={"orderId": "o-1"})
        # order-approval v1, but other steps. Deployed, the run would stay on the
        # function version it started on; once that version is deleted, it fails.
        [pinned] = env.redeploy(modules=["my_flows"], keep_previous=False)
        assert (pinned.workflow_name, pinned.runs, pinned.failing) == ("order-approval", 1, 1)
