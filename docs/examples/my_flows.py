from workflow_runner import Event, Steps, define_workflow, on_event
from workflow_runner.match import eq

order_approval = define_workflow(
    name="order-approval",
    trigger=on_event("order.placed", filter=lambda event: event.payload["total"] > 0),
    idempotency_key=Event.payload["orderId"],
    awaits={"approved": "order.approved"},
    steps=lambda s: [
        s.mail_send(to=Event.payload["email"], subject="Thanks", body="We got it."),
        s.wait_for_event("approved", match=eq("orderId", Event.payload["orderId"]), timeout="P3D"),
        s.branch(
            if_=Steps["order.approved"],  # the approval's payload, or None after three days
            on_true=[
                s.webhook_send(
                    url="https://hooks.example.com/fulfil",
                    body={"orderId": Event.payload["orderId"]},
                )
            ],
            on_false=[s.return_({"isSuccess": False, "error": "not approved in time"})],
        ),
        s.return_({"isSuccess": True}),
    ],
)
