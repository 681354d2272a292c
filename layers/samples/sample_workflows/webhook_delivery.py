"""One webhook per data.processed event, to the URL the event names."""

from __future__ import annotations

from workflow_runner import Event, define_workflow, on_event

webhook_delivery = define_workflow(
    name="webhook-delivery",
    trigger=on_event("data.processed"),
    steps=lambda s: [
        s.webhook_send(url=Event.payload["webhookUrl"], body=Event.payload["data"]),
        s.return_({"isSuccess": True}),
    ],
)
