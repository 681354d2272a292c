"""Ask two carriers for a freight quote at once and book the cheapest one that answers.

`freight-quotes` makes one callback per carrier (`s.create_callback`) before it asks
anyone, so both requests carry their carrier's own link (`ctx.callbacks[name].url`;
the token where no endpoint is deployed) and both carriers can answer at any time
within a day, in any order. The run then awaits the first carrier and, after it, the
second (`s.await_callback`): an answer that came while the run still waited for the
other one is kept, and the second await takes it at once. A carrier answers with its
quote (`{"price": 310}`) or reports that it cannot take the load (POST to the link +
`/fail`, `{"error": "NoCapacity"}`), which the awaits catch; a carrier that does not
answer within the day counts as no quote. The run books the cheapest quote by webhook,
or fails with the reason it returns when no carrier quoted.
"""

from __future__ import annotations

from workflow_runner import Event, StepContext, define_workflow, on_event

CARRIERS = ("north_freight", "bay_haulage")


def quote_request(carrier: str):
    """The request a carrier gets: the shipment and where to answer."""

    def body(ctx: StepContext) -> dict[str, object]:
        callback = ctx.callbacks[carrier]
        return {
            "shipmentId": ctx.event.payload["shipmentId"],
            "weightKg": ctx.event.payload["weightKg"],
            "answerTo": callback.url or callback.token,
        }

    return body


def quotes(ctx: StepContext) -> dict[str, object]:
    """Each carrier's quote; None for one that declined or did not answer in time."""
    answers = {carrier: ctx.steps[carrier] for carrier in CARRIERS}
    return {
        carrier: answer if isinstance(answer, dict) and not answer.get("failed") else None
        for carrier, answer in answers.items()
    }


def cheapest(ctx: StepContext) -> dict[str, object] | None:
    offered = [(quote["price"], carrier) for carrier, quote in quotes(ctx).items() if quote]
    if not offered:
        return None
    price, carrier = min(offered)
    return {"shipmentId": ctx.event.payload["shipmentId"], "carrier": carrier, "price": price}


def outcome(ctx: StepContext) -> dict[str, object]:
    booking = ctx.steps["booking"]
    declined = [c for c in CARRIERS if (ctx.steps[c] or {}).get("failed")]
    if booking is None:
        return {"isSuccess": False, "error": "no carrier quoted within a day", "declined": declined}
    return {"isSuccess": True, **booking, "declined": declined}


freight_quotes = define_workflow(
    name="freight-quotes",
    trigger=on_event("shipment.ready"),
    idempotency_key=Event.payload["shipmentId"],
    steps=lambda s: [
        *[s.create_callback(carrier, timeout="P1D") for carrier in CARRIERS],
        *[
            s.webhook_send(
                url=f"https://hooks.example.com/carriers/{carrier}", body=quote_request(carrier)
            )
            for carrier in CARRIERS
        ],
        *[s.await_callback(carrier, catch=True) for carrier in CARRIERS],
        s.compute("booking", cheapest),
        s.branch(
            if_=lambda ctx: ctx.steps["booking"] is not None,
            on_true=[
                s.webhook_send(
                    url="https://hooks.example.com/bookings", body=lambda ctx: ctx.steps["booking"]
                )
            ],
        ),
        s.return_(outcome),
    ],
)
