from workflow_runner import Event, Steps, define_workflow, on_event
from workflow_runner.match import eq
from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"

# What was deployed when the runs started: version 1, waiting at step 0.
version_1 = define_workflow(
    name="purchase",
    version=1,
    trigger=on_event("purchase.started"),
    idempotency_key=Event.payload["cartId"],
    awaits={"paid": "purchase.paid"},
    steps=lambda s: [
        s.wait_for_event(
            "paid", match=eq("cartId", Event.payload["cartId"]), timeout="P7D", result_key="payment"
        ),
        s.return_({"isSuccess": True, "payment": Steps["payment"]}),
    ],
    register=False,
)


def start(env, *carts):
    for cart in carts:
        env.put_event(
            tenant=TENANT, type="purchase.started", payload={"cartId": cart, "amount": 20}
        )


def test_runs_waiting_on_version_1_move_to_step_1_of_version_2_and_complete():
    with WorkflowTestEnv(workflows=[version_1]) as env:
        start(env, "c-1", "c-2")
        # Once the code they started on is gone too (its function versions pruned),
        # without a migration both would fail.
        [stranded] = env.redeploy(modules=["purchase"], keep_previous=False)
        assert stranded.failing == 2

        dry = env.migrate_runs(workflow="purchase", to_version=2, mapping=["0=1"], dry_run=True)
        assert [m.outcome for m in dry.moves] == ["would-move", "would-move"]
        report = env.migrate_runs(workflow="purchase", to_version=2, mapping=["0=1"])
        assert report.complete
        assert env.redeploy(modules=["purchase"]) == []  # nothing would fail now

        env.put_event(tenant=TENANT, type="purchase.paid", payload={"cartId": "c-1"})
        run = env.run(tenant=TENANT, workflow="purchase", key="c-1")
        assert run.status == "completed"
        assert run.result["payment"]["cartId"] == "c-1"
        assert "fraud" not in run.steps  # inserted before its place: it never ran for it


def test_without_a_mapping_the_runs_are_refused_and_nothing_is_written():
    with WorkflowTestEnv(workflows=[version_1]) as env:
        start(env, "c-1")
        env.redeploy(modules=["purchase"])
        [move] = env.migrate_runs(workflow="purchase", to_version=2).moves
        assert move.outcome == "refused"
        assert move.why == (
            "v2 step 0 is a compute; the run waits at a wait_for_event"
            " for 'purchase.paid' under 'payment'"
        )
        assert env.run(tenant=TENANT, workflow="purchase", key="c-1").status == "waiting"


def test_with_version_1_kept_next_to_version_2_no_run_fails_before_the_migration():
    with WorkflowTestEnv(workflows=[version_1]) as env:
        start(env, "c-1", "c-2")
        # The deploy keeps version 1: the waiting runs resume on it meanwhile.
        assert env.redeploy(workflows=[version_1], modules=["purchase"]) == []
        env.put_event(tenant=TENANT, type="purchase.paid", payload={"cartId": "c-1"})
        assert env.run(tenant=TENANT, workflow="purchase", key="c-1").status == "completed"

        assert env.migrate_runs(workflow="purchase", to_version=2, mapping=["0=1"]).complete
        # The next deploy removes version 1: nothing waits on it any more.
        assert env.redeploy(modules=["purchase"]) == []
        env.put_event(tenant=TENANT, type="purchase.paid", payload={"cartId": "c-2"})
        assert env.run(tenant=TENANT, workflow="purchase", key="c-2").status == "completed"
