"""Quote a parcel with three carriers at once and book the cheapest answer.

The three quotes are tasks of one `s.parallel` with a completion policy: one carrier
that cannot quote is tolerated (`Completion(tolerated_failures=1)`), so the step yields
a batch result (`results` in carrier order, None where a carrier failed, and the
`failures` with their task keys) instead of failing the run at the first refusal; a
second refusal exceeds the tolerance and fails the run with `failure_tolerance_exceeded`.
A quote that timed out is worth another try (`retry_on`); a carrier that says it is
unavailable is not asked again. The carriers are stand-ins: a parcel's payload names the
carriers that are down (`carriersDown`) or slow to answer once (`carriersSlow`).
"""

from __future__ import annotations

from collections.abc import Callable

from workflow_runner import Completion, Event, RetryPolicy, StepContext, define_workflow, on_event

# Price per kilogram of each carrier, in cents (the stand-ins' tariff).
CARRIERS = {"parcelco": 120, "fastship": 95, "slowpost": 80}


class CarrierTimeout(Exception):
    """The carrier did not answer in time (simulated): worth another try."""


class CarrierUnavailable(Exception):
    """The carrier cannot quote this parcel (simulated): asking again will not help."""


# Only a timeout is tried again (twice, 5 s then 10 s later); any other error is the
# carrier's answer.
ASK_AGAIN_ON_TIMEOUT = RetryPolicy(
    max_attempts=3, base="PT5S", jitter="none", retry_on=(CarrierTimeout,)
)


def quote_from(carrier: str) -> Callable[[StepContext], dict[str, object]]:
    def quote(ctx: StepContext) -> dict[str, object]:
        parcel = ctx.event.payload
        if carrier in parcel.get("carriersDown", []):
            raise CarrierUnavailable(f"{carrier} cannot quote parcel {parcel['parcelId']}")
        if carrier in parcel.get("carriersSlow", []) and ctx.workflow.retry_attempt == 1:
            raise CarrierTimeout(f"{carrier} did not answer")
        return {"carrier": carrier, "priceCents": CARRIERS[carrier] * parcel["weightKg"]}

    return quote


def cheapest(ctx: StepContext) -> dict[str, object]:
    quotes = [quote for quote in ctx.steps["quotes"]["results"] if quote is not None]
    return min(quotes, key=lambda quote: quote["priceCents"])


def booked(ctx: StepContext) -> dict[str, object]:
    batch = ctx.steps["quotes"]
    return {
        "isSuccess": True,
        "parcelId": ctx.event.payload["parcelId"],
        **ctx.steps["cheapest"],
        "quoted": batch["succeeded"],
        "refused": [failure["taskKey"] for failure in batch["failures"]],
    }


shipping_quote = define_workflow(
    name="shipping-quote",
    trigger=on_event("parcel.ready"),
    idempotency_key=Event.payload["parcelId"],
    steps=lambda s: [
        s.parallel(
            *(s.task(name, quote_from(name), retry=ASK_AGAIN_ON_TIMEOUT) for name in CARRIERS),
            result_key="quotes",
            completion=Completion(tolerated_failures=1),
        ),
        s.compute("cheapest", cheapest),
        s.webhook_send(
            url="https://hooks.example.com/shipments",
            body=lambda ctx: {"parcelId": ctx.event.payload["parcelId"], **ctx.steps["cheapest"]},
        ),
        s.return_(booked),
    ],
)
