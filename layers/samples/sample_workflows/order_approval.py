"""An order waits up to three days for its approval; approved orders are confirmed
by mail and a fulfilment webhook, unapproved ones end as failed."""

from __future__ import annotations

from workflow_runner import define_workflow, on_event

order_approval = define_workflow(
    name="order-approval",
    trigger=on_event("order.placed", filter=lambda event: event.payload.get("total", 0) > 0),
    idempotency_key=lambda event: event.payload["orderId"],
    awaits={"approved": "order.approved"},
    steps=lambda s: [
        s.mail_send(
            to=lambda ctx: ctx.event.payload["email"],
            subject="We received your order",
            body="We'll let you know once it is approved.",
        ),
        s.wait_for_event(
            event="order.approved",
            match=lambda ctx: {
                "version": 1,
                "expr": {
                    "kind": "atom",
                    "path": ["orderId"],
                    "op": {"kind": "eq", "value": ctx.event.payload["orderId"]},
                },
            },
            timeout="P3D",
        ),
        s.compute("approved", lambda ctx: ctx.steps["order.approved"] is not None),
        s.branch(
            if_=lambda ctx: ctx.steps["approved"],
            on_true=[
                s.mail_send(
                    to=lambda ctx: ctx.event.payload["email"],
                    subject="Your order is approved",
                    body="It is on its way.",
                ),
                s.webhook_send(
                    url="https://hooks.example.com/fulfilment",
                    body=lambda ctx: {
                        "orderId": ctx.event.payload["orderId"],
                        "approvedBy": ctx.steps["order.approved"].get("approver"),
                    },
                ),
                s.return_({"isSuccess": True}),
            ],
            on_false=[s.return_({"isSuccess": False, "error": "not approved within 3 days"})],
        ),
    ],
)
