from workflow_runner import (
    Completion,
    Event,
    RetryPolicy,
    StepContext,
    define_workflow,
    on_event,
)

# A dropped connection is worth a second try; anything else is the carrier's answer.
TRY_TWICE = RetryPolicy(max_attempts=2, retry_on=(ConnectionError,))


def quote_from(carrier: str):
    def quote(ctx: StepContext) -> dict[str, object]:
        # Stands for a call to the carrier's API; the tests replace it.
        return {"carrier": carrier, "price": 10}

    return quote


def cheapest(ctx: StepContext) -> dict[str, object]:
    answers = [quote for quote in ctx.steps["quotes"]["results"] if quote is not None]
    return min(answers, key=lambda quote: quote["price"])


quick_quote = define_workflow(
    name="quick-quote",
    trigger=on_event("parcel.ready"),
    idempotency_key=Event.payload["parcelId"],
    steps=lambda s: [
        # One carrier that cannot quote is fine; two fail the run.
        s.parallel(
            s.task("parcelco", quote_from("parcelco"), retry=TRY_TWICE),
            s.task("fastship", quote_from("fastship"), retry=TRY_TWICE),
            s.task("slowpost", quote_from("slowpost"), retry=TRY_TWICE),
            result_key="quotes",
            completion=Completion(tolerated_failures=1),
        ),
        s.compute("cheapest", cheapest),
        s.return_(lambda ctx: {"isSuccess": True, "carrier": ctx.steps["cheapest"]["carrier"]}),
    ],
)
