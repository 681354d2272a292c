from workflow_runner import Batch, Event, Steps, define_workflow, on_event


def total(ctx):
    return sum(event.payload["units"] for event in ctx.events)


# One invoice line per 100 usage events of a customer, or per hour of them.
usage_billing = define_workflow(
    name="usage-billing",
    trigger=on_event("usage.recorded"),
    batch=Batch(100, "PT1H", key=Event.payload["customerId"]),
    steps=lambda s: [
        s.compute("units", total),
        s.return_({"customer": Event.payload["customerId"], "units": Steps["units"]}),
    ],
)
