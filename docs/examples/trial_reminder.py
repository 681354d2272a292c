from workflow_runner import Event, define_workflow, on_event

SUBJECT = "Your trial ends in 3 days"  # edited from "Trial ends soon" while runs waited

trial_reminder = define_workflow(
    name="trial-reminder",
    trigger=on_event("trial.started"),
    idempotency_key=Event.payload["accountId"],
    steps=lambda s: [
        s.wait(for_="P11D"),
        s.mail_send(to=Event.payload["email"], subject=SUBJECT, body="Upgrade to keep your data."),
        s.return_({"isSuccess": True}),
    ],
)
