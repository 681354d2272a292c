from workflow_runner import Concurrency, Event, Steps, Throttle, define_workflow, on_event


def provision(ctx):
    """The provider's API call (here: what it would answer)."""
    return {"account": ctx.event.payload["accountId"], "user": ctx.event.payload["userId"]}


signup = define_workflow(
    name="signup",
    trigger=on_event("user.signed-up"),
    idempotency_key=Event.payload["userId"],
    # At most 20 runs of a tenant executing a pass or a task at once; when runs queue
    # for a slot, a paying customer's goes 5 minutes ahead of the others.
    concurrency=Concurrency(20),
    priority=lambda ctx: 300 if ctx.event.payload.get("plan") == "paid" else 0,
    steps=lambda s: [
        s.task(
            "provisioned",
            provision,
            # The provider allows 10 calls a minute per account, one at a time, and
            # 100 calls in flight across every tenant.
            throttle=Throttle(10, "PT1M", key=Event.payload["accountId"]),
            concurrency=[
                Concurrency(1, key=Event.payload["accountId"]),
                Concurrency(100, key="provider", scope="global"),
            ],
        ),
        s.return_(Steps["provisioned"]),
    ],
)
