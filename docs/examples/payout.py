from workflow_runner import Event, RetryPolicy, StepContext, Steps, define_workflow, on_event


def transfer(ctx: StepContext) -> dict[str, str]:
    # Stands for the bank's API; the tests replace it.
    return {"transferId": f"t-{ctx.event.payload['invoiceId']}"}


supplier_payout = define_workflow(
    name="supplier-payout",
    trigger=on_event("invoice.approved"),
    idempotency_key=Event.payload["invoiceId"],
    steps=lambda s: [
        s.task(
            "transfer",
            transfer,
            retry=RetryPolicy(
                max_attempts=3,
                retry_on=(ConnectionError,),  # the bank was not reached: try again
                backoff="exponential",
                base="PT10S",
                rate=3.0,  # 10 s, then 30 s
                jitter="none",
                at_most_once=True,  # never send money twice
            ),
            catch=True,
        ),
        s.branch(
            if_=lambda ctx: ctx.steps["transfer"].get("failed"),
            on_true=[
                s.mail_send(
                    to="finance@example.com",
                    subject="Check the transfer by hand",
                    body=lambda ctx: f"Invoice {ctx.event.payload['invoiceId']}: unclear.",
                ),
                s.return_({"isSuccess": False, "error": "transfer unclear"}),
            ],
            on_false=[s.return_({"isSuccess": True, "transfer": Steps["transfer"]})],
        ),
    ],
)
