"""Every day at 09:00 UTC, per tenant: one webhook with the scheduled time."""

from __future__ import annotations

from workflow_runner import Event, define_workflow, on_cron

daily_report = define_workflow(
    name="daily-report",
    trigger=on_cron("0 9 * * *"),
    steps=lambda s: [
        s.webhook_send(
            url="https://hooks.example.com/daily-report",
            body={"scheduledAt": Event.payload["scheduledAt"]},
        ),
        s.return_({"isSuccess": True}),
    ],
)
