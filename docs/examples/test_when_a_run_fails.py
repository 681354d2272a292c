from datetime import UTC, datetime

from workflow_runner import Event, define_workflow, on_event
from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"


def charge(ctx):
    return {"paidAt": datetime(2026, 1, 5, 9, tzinfo=UTC)}  # not JSON


payment = define_workflow(
    name="payment",
    trigger=on_event("payment.requested"),
    idempotency_key=Event.payload["paymentId"],
    register=False,
    steps=lambda s: [s.task("charge", charge), s.return_({"isSuccess": True})],
)


def test_a_failed_run_shows_the_text_behind_its_error():
    with WorkflowTestEnv(workflows=[payment]) as env:
        env.put_event(tenant=TENANT, type="payment.requested", payload={"paymentId": "p-1"})
        env.advance("1m")
        run = env.run(tenant=TENANT, workflow="payment", key="p-1")
        assert (run.status, run.reason) == ("failed", "result_not_storable")
        # What AWS would store stays generic; the local log has the key, place and type.
        assert "the result of task 'charge' is not JSON: .paidAt is a datetime.datetime" in (
            run.error_detail
        )
        assert run.log  # every line the local runtime logged about the run
