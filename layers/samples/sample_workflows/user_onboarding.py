"""Welcome mail, a day's wait, a tips or reminder mail by engagement, a week's wait,
then a webhook to the CRM. Triggered by user.signed-up, one run per user."""

from __future__ import annotations

from workflow_runner import Event, Steps, define_workflow, on_event

CRM_HOOK = "https://hooks.example.com/crm-onboarding"

user_onboarding = define_workflow(
    name="user-onboarding",
    trigger=on_event("user.signed-up"),
    idempotency_key=lambda event: f"onboarding:{event.payload['userId']}",
    steps=lambda s: [
        s.mail_send(
            to=Event.payload["email"],
            subject="Welcome!",
            body="Thanks for signing up — we'll check in soon.",
        ),
        s.wait(for_="P1D"),
        # Demo-only engagement flag; a real app would read the user's last activity.
        s.compute("engaged", lambda ctx: str(ctx.event.payload["userId"]).startswith("active-")),
        s.branch(
            if_=Steps["engaged"],
            on_true=[
                s.mail_send(
                    to=Event.payload["email"],
                    subject="Engagement tips",
                    body="You're off to a great start — try these next.",
                )
            ],
            on_false=[
                s.mail_send(
                    to=Event.payload["email"],
                    subject="Getting started",
                    body="Need a hand? Here's how to begin.",
                )
            ],
        ),
        s.wait(for_="P7D"),
        s.webhook_send(url=CRM_HOOK, body={"userId": Event.payload["userId"], "stage": "day8"}),
        s.return_({"isSuccess": True}),
    ],
)
