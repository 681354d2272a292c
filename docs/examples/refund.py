from my_app import payments
from workflow_runner import Event, RetryPolicy, StepContext, Steps, define_workflow, on_event
from workflow_runner.match import eq


def refund_payment(ctx: StepContext) -> dict[str, str]:
    # The task key is the same for every attempt: the provider sees one refund.
    return payments.refund(ctx.event.payload["paymentId"], idempotency_key=ctx.workflow.task_key)


refund = define_workflow(
    name="refund",
    trigger=on_event("refund.requested"),
    idempotency_key=Event.payload["refundId"],
    awaits={"approval": "refund.approved"},
    steps=lambda s: [
        s.mail_send(to=Event.payload["email"], subject="Refund requested", body="We are on it."),
        s.wait_for_event(
            "approval", match=eq("refundId", Event.payload["refundId"]), timeout="P3D"
        ),
        s.branch(
            if_=Steps["refund.approved"],
            on_true=[
                s.task("refund", refund_payment, retry=RetryPolicy(max_attempts=5)),
                s.return_({"isSuccess": True, "refund": Steps["refund"]}),
            ],
            on_false=[s.return_({"isSuccess": False, "error": "not approved in time"})],
        ),
    ],
)
