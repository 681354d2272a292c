"""Push an inventory change to a flaky partner, retrying with exponential backoff.

`failAttempts` in the event makes the partner call fail that many times first, so
the demo and tests can watch the retries happen."""

from __future__ import annotations

from workflow_runner import StepContext, Steps, define_workflow, on_event


class PartnerUnavailable(Exception):
    """The partner system refused the update (simulated)."""


def push_to_partner(ctx: StepContext) -> dict[str, object]:
    if ctx.workflow.retry_attempt <= int(ctx.event.payload.get("failAttempts", 0)):
        raise PartnerUnavailable(f"partner refused sku {ctx.event.payload['sku']}")
    return {"sku": ctx.event.payload["sku"], "attempt": ctx.workflow.retry_attempt}


inventory_sync = define_workflow(
    name="inventory-sync",
    trigger=on_event("inventory.changed"),
    idempotency_key=lambda event: f"{event.payload['sku']}:{event.payload['revision']}",
    steps=lambda s: [
        s.retry(
            times=5,
            backoff="exponential",
            base="PT30S",
            cap="PT10M",
            do=[s.compute("pushed", push_to_partner)],
        ),
        s.webhook_send(url="https://hooks.example.com/inventory-synced", body=Steps["pushed"]),
        s.return_({"isSuccess": True}),
    ],
)
