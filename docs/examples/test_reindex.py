from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"


def test_a_burst_of_edits_reindexes_once_with_the_last():
    with WorkflowTestEnv(modules=["reindex"]) as env:
        for version in (1, 2, 3):
            env.put_event(
                tenant=TENANT, type="doc.edited", payload={"docId": "d1", "version": version}
            )
            env.advance("PT1M")
        (run,) = env.runs(tenant=TENANT, workflow="reindex")
        assert run.status == "waiting"  # an edit a minute ago: not quiet for 2 minutes yet
        env.advance("PT1M")
        (run,) = env.runs(tenant=TENANT, workflow="reindex")
        assert run.status == "completed" and run.result == {"version": 3}
