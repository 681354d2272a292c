from workflow_runner import Event, Scope, StepContext, Steps, define_workflow, on_event


class CourierClosed(Exception):
    """The courier takes parcels from 09:00 UTC on."""


def total(ctx: StepContext) -> float:
    return sum(line["qty"] * line["price"] for line in ctx.event.payload["lines"])


def pick_list(ctx: StepContext) -> str:
    line = ctx.scope["line"]
    return f"Pick {line['qty']} × {line['sku']}"


def book_courier(ctx: StepContext) -> dict[str, str]:
    # Pure and deterministic: it decides on the pass's business time, ctx.now.
    if ctx.now.hour < 9:
        raise CourierClosed(ctx.now.isoformat())
    return {"booked": ctx.now.isoformat(), "attempt": ctx.workflow.retry_attempt}


packing = define_workflow(
    name="packing",
    trigger=on_event("order.paid"),
    idempotency_key=Event.payload["orderId"],
    steps=lambda s: [
        s.compute("total", total),
        s.for_each(
            Event.payload["lines"],
            as_="line",
            do=[
                s.mail_send(
                    to="warehouse@example.com",
                    subject=pick_list,
                    body=Scope["line"]["sku"],
                ),
            ],
        ),
        s.retry(times=5, backoff="fixed", base="PT1H", do=[s.compute("courier", book_courier)]),
        s.branch(
            if_=lambda ctx: ctx.steps["total"] >= 100,
            on_true=[
                s.mail_send(to=Event.payload["email"], subject="A gift is on its way", body="…")
            ],
        ),
        s.return_({"isSuccess": True, "total": Steps["total"], "courier": Steps["courier"]}),
    ],
)
