from workflow_runner import CancelOn, Event, define_workflow, on_event

# Remind a customer of an unpaid order after a day, unless the order is paid or
# cancelled before that: either event cancels the run it names.
payment_reminder = define_workflow(
    name="payment-reminder",
    trigger=on_event("order.placed"),
    idempotency_key=Event.payload["orderId"],
    cancel_on=[
        CancelOn("order.paid", match={"orderId": Event.payload["orderId"]}),
        CancelOn("order.cancelled", match={"order.id": Event.payload["orderId"]}, within="P2D"),
    ],
    steps=lambda s: [
        s.wait(for_="P1D"),
        s.mail_send(to=Event.payload["email"], subject="Your order awaits payment", body="..."),
    ],
)
