from workflow_runner import Event, RetryPolicy, StepContext, define_workflow, on_call, on_event


def reserve_stock(ctx: StepContext) -> dict[str, str]:
    # Stands for your warehouse client; a child's input is its event payload.
    return {"reservation": f"r-{ctx.event.payload['orderId']}"}


fulfil_order = define_workflow(
    name="fulfil-order",
    trigger=on_call(),  # started only by other workflows
    steps=lambda s: [
        s.task("stock", reserve_stock, retry=RetryPolicy(max_attempts=3)),
        s.return_(lambda ctx: {"orderId": ctx.event.payload["orderId"], **ctx.steps["stock"]}),
    ],
)

batch = define_workflow(
    name="batch-fulfilment",
    trigger=on_event("batch.submitted"),
    idempotency_key=Event.payload["batchId"],
    steps=lambda s: [
        s.map(
            Event.payload["orders"],
            workflow="fulfil-order",
            concurrency=5,
            key=lambda ctx: f"{ctx.event.payload['batchId']}:{ctx.scope['item']['orderId']}",
            result_key="orders",
            catch=True,
        ),
        s.return_(lambda ctx: {"isSuccess": True, "orders": ctx.steps["orders"]}),
    ],
)
