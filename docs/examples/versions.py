from workflow_runner import Event, Steps, define_workflow, on_event
from workflow_runner.match import eq

TRIGGER = on_event("order.placed")
AWAITS = {"approved": "order.approved"}

# Keeps serving the runs that started on it.
order_approval_v1 = define_workflow(
    name="order-approval",
    version=1,
    trigger=TRIGGER,
    idempotency_key=Event.payload["orderId"],
    awaits=AWAITS,
    steps=lambda s: [
        s.wait_for_event("approved", match=eq("orderId", Event.payload["orderId"]), timeout="P3D"),
        s.return_({"isSuccess": True, "approved": Steps["order.approved"]}),
    ],
)

# New runs start here: the highest version.
order_approval_v2 = define_workflow(
    name="order-approval",
    version=2,
    trigger=TRIGGER,
    idempotency_key=Event.payload["orderId"],
    awaits=AWAITS,
    steps=lambda s: [
        s.wait_for_event("approved", match=eq("orderId", Event.payload["orderId"]), timeout="P5D"),
        s.return_({"isSuccess": True, "approved": Steps["order.approved"]}),
    ],
)
