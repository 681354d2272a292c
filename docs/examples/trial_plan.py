from workflow_runner import Event, Steps, define_workflow, on_event

# Edited while runs waited: a step inserted before the wait (a structural change).
trial_plan = define_workflow(
    name="trial-plan",
    trigger=on_event("trial.started"),
    idempotency_key=Event.payload["accountId"],
    steps=lambda s: [
        s.compute("plan", lambda ctx: "pro"),
        s.wait(for_="P14D"),
        s.mail_send(to=Event.payload["email"], subject="Your trial has ended", body="-"),
        s.return_({"plan": Steps["plan"]}),
    ],
)
