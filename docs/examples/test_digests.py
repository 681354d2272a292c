from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"


def test_notes_beyond_the_rate_start_nothing_until_the_hour_passed():
    with WorkflowTestEnv(modules=["digests"]) as env:
        for _ in range(5):
            env.put_event(tenant=TENANT, type="note.added", payload={"userId": "ada"})
        assert len(env.runs(tenant=TENANT, workflow="note-digest")) == 3
        env.advance("PT1H")
        env.put_event(tenant=TENANT, type="note.added", payload={"userId": "ada"})
        assert len(env.runs(tenant=TENANT, workflow="note-digest")) == 4


def test_one_sync_per_account_at_a_time():
    with WorkflowTestEnv(modules=["digests"]) as env:
        for _ in range(3):
            env.put_event(tenant=TENANT, type="crm.changed", payload={"accountId": "acme"})
        assert len(env.runs(tenant=TENANT, workflow="crm-sync")) == 1
        env.advance("PT10M")  # it settled: the account's next change starts a sync
        env.put_event(tenant=TENANT, type="crm.changed", payload={"accountId": "acme"})
        assert len(env.runs(tenant=TENANT, workflow="crm-sync")) == 2
