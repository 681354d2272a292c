from workflow_runner import (
    Event,
    RetryPolicy,
    StepContext,
    Steps,
    define_workflow,
    on_call,
    on_event,
)


def quote_from(carrier: str):
    def quote(ctx: StepContext) -> dict[str, object]:
        # Stands for a call to the carrier's API; the tests replace it.
        return {"carrier": carrier, "price": 10}

    return quote


def cheapest(ctx: StepContext) -> dict[str, object]:
    return min(ctx.steps["quotes"], key=lambda quote: quote["price"])


book_shipment = define_workflow(
    name="book-shipment",
    trigger=on_call(),
    steps=lambda s: [
        s.return_(lambda ctx: {"booked": ctx.event.payload["carrier"]}),
    ],
)

notify_customer = define_workflow(
    name="notify-customer",
    trigger=on_call(),
    steps=lambda s: [
        s.mail_send(to=Event.payload["email"], subject="Your parcel is booked", body="…"),
    ],
)

shipping = define_workflow(
    name="shipping",
    trigger=on_event("order.packed"),
    idempotency_key=Event.payload["orderId"],
    steps=lambda s: [
        s.parallel(
            s.task("parcelco", quote_from("parcelco"), retry=RetryPolicy(max_attempts=2)),
            s.task("fastship", quote_from("fastship"), retry=RetryPolicy(max_attempts=2)),
            result_key="quotes",
        ),
        s.compute("cheapest", cheapest),
        s.call_workflow("book-shipment", input=Steps["cheapest"], result_key="booking"),
        s.start_workflow("notify-customer", input={"email": Event.payload["email"]}),
        s.return_({"isSuccess": True, "booking": Steps["booking"]}),
    ],
)
