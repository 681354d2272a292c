from workflow_runner import Event, define_workflow, on_event

trial = define_workflow(
    name="trial-ending",
    trigger=on_event("trial.started"),
    idempotency_key=Event.payload["accountId"],
    steps=lambda s: [
        s.wait(for_="P13D"),
        s.mail_send(to=Event.payload["email"], subject="Your trial ends tomorrow", body="…"),
        s.return_({"isSuccess": True}),
    ],
)
