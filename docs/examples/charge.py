from my_app import payments
from my_app.payments import CardDeclined
from workflow_runner import Event, RetryPolicy, StepContext, Steps, define_workflow, on_event


def charge(ctx: StepContext) -> dict[str, str]:
    # The task key is the same on every attempt: hand it to the provider.
    return payments.charge(ctx.event.payload["orderId"], idempotency_key=ctx.workflow.task_key)


checkout = define_workflow(
    name="checkout",
    trigger=on_event("order.confirmed"),
    idempotency_key=Event.payload["orderId"],
    steps=lambda s: [
        s.task(
            "charge",
            charge,
            retry=RetryPolicy(
                max_attempts=5,
                backoff="exponential",
                base="PT1S",
                cap="PT5M",
                jitter="full",
                non_retryable=(CardDeclined,),
            ),
            timeout="PT30S",
            catch=True,
        ),
        s.branch(
            if_=lambda ctx: ctx.steps["charge"].get("failed"),
            on_true=[s.return_({"isSuccess": False, "error": "payment failed"})],
            on_false=[s.return_({"isSuccess": True, "charge": Steps["charge"]})],
        ),
    ],
)
