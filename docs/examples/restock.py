from workflow_runner import (
    Completion,
    Event,
    RetryPolicy,
    StepContext,
    Steps,
    define_workflow,
    on_call,
    on_event,
)


def reserve(ctx: StepContext) -> dict[str, object]:
    # Stands for the warehouse's API; the tests replace it. The item's index in the
    # map is the warehouse's rank in the list.
    return {"warehouse": ctx.event.payload["warehouse"], "rank": ctx.workflow.map_index}


reserve_at_warehouse = define_workflow(
    name="reserve-at-warehouse",
    trigger=on_call(),
    steps=lambda s: [
        s.task("reservation", reserve, retry=RetryPolicy(max_attempts=2)),
        s.return_(Steps["reservation"]),
    ],
)

restock = define_workflow(
    name="restock",
    trigger=on_event("stock.low"),
    idempotency_key=Event.payload["sku"],
    steps=lambda s: [
        # Ask the warehouses in turn: two reservations are enough, one refusal is fine.
        s.map(
            Event.payload["warehouses"],
            workflow="reserve-at-warehouse",
            concurrency=1,
            result_key="reservations",
            completion=Completion(min_successful=2, tolerated_failures=1),
            catch=True,
        ),
        s.branch(
            if_=lambda ctx: ctx.steps["reservations"]["completion"] == "failure_tolerance_exceeded",
            on_true=[s.return_({"isSuccess": False, "error": "not enough stock"})],
            on_false=[s.return_({"isSuccess": True, "reserved": Steps["reservations"]})],
        ),
    ],
)
