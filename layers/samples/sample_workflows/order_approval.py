"""An order waits up to three days for its approval; approved orders are confirmed
by mail and a fulfilment webhook, unapproved ones end as failed."""

from __future__ import annotations

from workflow_runner import Event, Steps, define_workflow, on_event
from workflow_runner.match import eq

order_approval = define_workflow(
    name="order-approval",
    trigger=on_event("order.placed", filter=lambda event: event.payload.get("total", 0) > 0),
    idempotency_key=Event.payload["orderId"],
    awaits={"approved": "order.approved"},
    steps=lambda s: [
        s.mail_send(
            to=Event.payload["email"],
            subject="We received your order",
            body="We'll let you know once it is approved.",
        ),
        s.wait_for_event("approved", match=eq("orderId", Event.payload["orderId"]), timeout="P3D"),
        # The approval's payload, or None when three days passed without one.
        s.branch(
            if_=Steps["order.approved"],
            on_true=[
                s.mail_send(
                    to=Event.payload["email"],
                    subject="Your order is approved",
                    body="It is on its way.",
                ),
                s.webhook_send(
                    url="https://hooks.example.com/fulfilment",
                    body={
                        "orderId": Event.payload["orderId"],
                        "approvedBy": Steps["order.approved"]["approver"],
                    },
                ),
                s.return_({"isSuccess": True}),
            ],
            on_false=[s.return_({"isSuccess": False, "error": "not approved within 3 days"})],
        ),
    ],
)
