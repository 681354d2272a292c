"""Fulfil a batch of orders: one child run per order, five at a time, then report and
wait for finance to approve the invoice run.

`batch-fulfilment` maps the batch's orders onto `fulfil-order` runs (at most five at
once; a failed order does not stop the others: `catch=True` puts its failure in its
slot), posts a summary to the warehouse, and mails finance the summary with a callback
link (`ctx.callback.url`; the `wfr callbacks complete` command with the token where no
endpoint is deployed). Finance answers `{"approved": true}` (or false) through it within
two days: approved batches are sent to invoicing, rejected ones are not, and without an
answer the run fails with the reason the workflow returns. `fulfil-order` is started
only by other workflows (`on_call()`): it reserves stock through a task (a stand-in that
refuses orders with `"outOfStock": true`), mails the customer and returns what it did.
"""

from __future__ import annotations

from workflow_runner import Event, RetryPolicy, StepContext, define_workflow, on_call, on_event


class OutOfStock(Exception):
    """The warehouse cannot reserve the order's items (simulated)."""


def reserve_stock(ctx: StepContext) -> dict[str, object]:
    order = ctx.event.payload
    if order.get("outOfStock"):
        raise OutOfStock(f"order {order['orderId']}")
    return {"orderId": order["orderId"], "reservation": f"r-{order['orderId']}"}


def summary(ctx: StepContext) -> dict[str, object]:
    results = ctx.steps["orders"]
    failed = [r["runId"] for r in results if r.get("failed")]
    return {
        "batchId": ctx.event.payload["batchId"],
        "fulfilled": len(results) - len(failed),
        "failed": len(failed),
    }


def approval_request(ctx: StepContext) -> str:
    """The mail to finance: the summary, and how to answer (the link, or the command)."""
    batch = ctx.steps["summary"]
    if ctx.callback.url:
        how = f'POST {{"approved": true}} (or false) to {ctx.callback.url}'
    else:
        how = f"wfr callbacks complete {ctx.callback.token} --payload '{{\"approved\": true}}'"
    return (
        f"Batch {batch['batchId']}: {batch['fulfilled']} orders fulfilled, "
        f"{batch['failed']} failed.\nApprove the invoice run within 2 days: {how}"
    )


def approved(ctx: StepContext) -> bool:
    """Finance said yes (None: nobody answered before the timeout)."""
    answer = ctx.steps["approval"]
    return isinstance(answer, dict) and answer.get("approved") is True


def outcome(ctx: StepContext) -> dict[str, object]:
    """What the batch returns: invoiced or not; no answer in time fails the run."""
    if ctx.steps["approval"] is None:
        return {
            "isSuccess": False,
            **ctx.steps["summary"],
            "error": "finance did not answer within 2 days",
        }
    return {"isSuccess": True, **ctx.steps["summary"], "invoiced": approved(ctx)}


fulfil_order = define_workflow(
    name="fulfil-order",
    trigger=on_call(),
    steps=lambda s: [
        s.task(
            "stock",
            reserve_stock,
            retry=RetryPolicy(max_attempts=3, base="PT5S", non_retryable=(OutOfStock,)),
        ),
        s.mail_send(
            to=Event.payload["email"],
            subject="Your order is on its way",
            body=lambda ctx: f"Order {ctx.event.payload['orderId']} is reserved and ships today.",
        ),
        s.return_(lambda ctx: {"orderId": ctx.event.payload["orderId"], **ctx.steps["stock"]}),
    ],
)

batch_fulfilment = define_workflow(
    name="batch-fulfilment",
    trigger=on_event("batch.submitted"),
    idempotency_key=Event.payload["batchId"],
    steps=lambda s: [
        s.map(
            Event.payload["orders"],
            workflow="fulfil-order",
            key=lambda ctx: f"{ctx.event.payload['batchId']}:{ctx.scope['item']['orderId']}",
            concurrency=5,
            result_key="orders",
            catch=True,
        ),
        s.compute("summary", summary),
        s.webhook_send(
            url="https://hooks.example.com/batches", body=lambda ctx: ctx.steps["summary"]
        ),
        s.mail_send(
            to="finance@example.com",
            subject=lambda ctx: f"Approve the invoice run of batch {ctx.event.payload['batchId']}?",
            body=approval_request,
        ),
        s.wait_for_callback("approval", timeout="P2D"),
        s.branch(
            if_=approved,
            on_true=[
                s.webhook_send(
                    url="https://hooks.example.com/invoices",
                    body=lambda ctx: {**ctx.steps["summary"], "approval": ctx.steps["approval"]},
                )
            ],
        ),
        s.return_(outcome),
    ],
)
