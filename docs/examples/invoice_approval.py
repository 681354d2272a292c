from workflow_runner import Event, StepContext, define_workflow, on_event


def approval_request(ctx: StepContext) -> str:
    invoice = ctx.event.payload
    return (
        f"Invoice run {invoice['invoiceRunId']}: {invoice['total']} EUR.\n"
        f'Approve it within 2 days: POST {{"approved": true}} to {ctx.callback.url}'
    )


def approved(ctx: StepContext) -> bool:
    return (ctx.steps["approval"] or {}).get("approved") is True  # None: no answer in time


invoice_approval = define_workflow(
    name="invoice-approval",
    trigger=on_event("invoices.prepared"),
    idempotency_key=Event.payload["invoiceRunId"],
    steps=lambda s: [
        s.mail_send(
            to="finance@example.com", subject="Approve the invoice run?", body=approval_request
        ),
        s.wait_for_callback("approval", timeout="P2D"),
        s.branch(
            if_=approved,
            on_true=[s.webhook_send(url="https://hooks.example.com/invoices", body=Event.payload)],
        ),
        s.return_(
            lambda ctx: {"isSuccess": ctx.steps["approval"] is not None, "invoiced": approved(ctx)}
        ),
    ],
)
