from workflow_runner import (
    Event,
    RetryPolicy,
    StepContext,
    define_workflow,
    on_call,
    on_event,
)


def reserve_stock(ctx: StepContext) -> dict[str, object]:
    # Stands for the warehouse API; the tests replace it. A branch sees the run's event.
    return {"warehouse": "north", "orderId": ctx.event.payload["orderId"]}


def charge_card(ctx: StepContext) -> dict[str, object]:
    # Stands for the payment provider; the tests replace it.
    return {"charged": ctx.event.payload["total"]}


fraud_check = define_workflow(
    name="fraud-check",
    trigger=on_call(),
    steps=lambda s: [s.return_({"risk": "low", "orderId": Event.payload["orderId"]})],
)

prepare_order = define_workflow(
    name="prepare-order",
    trigger=on_event("order.placed"),
    idempotency_key=Event.payload["orderId"],
    steps=lambda s: [
        s.parallel(
            branches=[
                # 0: reserve the stock; the branch's result is the warehouse alone.
                [
                    s.task("reserve", reserve_stock, retry=RetryPolicy(max_attempts=3)),
                    s.branch_result(lambda ctx: ctx.steps["reserve"]["warehouse"]),
                ],
                # 1: charge after the two-hour cancellation window; its result is the
                #    charge (the value its last step stored).
                [s.wait(for_="PT2H"), s.task("charge", charge_card)],
                # 2: a child workflow of its own.
                [
                    s.call_workflow(
                        "fraud-check",
                        input={"orderId": Event.payload["orderId"]},
                        result_key="fraud",
                    )
                ],
            ],
            max_concurrency=2,
            result_key="prepared",
        ),
        s.return_(
            lambda ctx: {
                "isSuccess": True,
                "warehouse": ctx.steps["prepared"][0],
                "charge": ctx.steps["prepared"][1],
                "fraud": ctx.steps["prepared"][2]["risk"],
            }
        ),
    ],
)
