from workflow_runner import Event, Steps, define_workflow, on_event
from workflow_runner.match import eq


def fraud_score(ctx):
    return 80 if ctx.event.payload["amount"] > 1000 else 0


# Version 2 inserted the fraud check before the wait for the payment: the wait, step 0
# of version 1, is step 1 now.
purchase = define_workflow(
    name="purchase",
    version=2,
    trigger=on_event("purchase.started"),
    idempotency_key=Event.payload["cartId"],
    awaits={"paid": "purchase.paid"},
    steps=lambda s: [
        s.compute("fraud", fraud_score),
        s.wait_for_event(
            "paid", match=eq("cartId", Event.payload["cartId"]), timeout="P7D", result_key="payment"
        ),
        s.return_({"isSuccess": True, "payment": Steps["payment"]}),
    ],
)
