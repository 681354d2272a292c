"""Deliver a data.processed event to the webhook it names, and act on the answer.

The call is a durable task: the run waits while a worker calls the partner, retries
5xx, 429 and network errors three times, and resumes with what the partner answered
(`{"status": ..., "body": ...}`). A partner that keeps failing, answers 4xx, or sits
behind an address the SSRF guard refuses does not fail the run: `catch=True` hands the
failure to the next step, which mails operations and ends the run with the reason.

Version 1 sent the webhook fire-and-forget and completed in the same pass, so no run of
it ever waits; it is not kept registered."""

from __future__ import annotations

from workflow_runner import Event, RetryPolicy, StepContext, Steps, define_workflow, on_event


def delivery_failed(ctx: StepContext) -> bool:
    return bool(ctx.steps["partner"].get("failed"))


webhook_delivery = define_workflow(
    name="webhook-delivery",
    version=2,
    trigger=on_event("data.processed"),
    steps=lambda s: [
        s.webhook_send(
            url=Event.payload["webhookUrl"],
            body=Event.payload["data"],
            result_key="partner",
            retry=RetryPolicy(max_attempts=3, base="PT10S", cap="PT1M", jitter="none"),
            catch=True,
        ),
        s.branch(
            if_=delivery_failed,
            on_true=[
                s.mail_send(
                    to="ops@example.com",
                    subject="A webhook could not be delivered",
                    body=lambda ctx: (
                        f"{ctx.event.payload['webhookUrl']}: {ctx.steps['partner']['error']} "
                        f"after {ctx.steps['partner']['attempts']} attempt(s)"
                    ),
                ),
                s.return_(lambda ctx: {"isSuccess": False, "error": ctx.steps["partner"]["error"]}),
            ],
            on_false=[s.return_({"isSuccess": True, "partner": Steps["partner"]["body"]})],
        ),
    ],
)
