from workflow_runner import Event, RateLimit, Singleton, define_workflow, on_event

# At most 3 digests an hour per user: further notes start nothing (recorded as skipped,
# with the reason: `wfr runs list --skipped`).
note_digest = define_workflow(
    name="note-digest",
    trigger=on_event("note.added"),
    rate_limit=RateLimit(3, "PT1H", key=Event.payload["userId"]),
    steps=lambda s: [s.return_({"digestFor": Event.payload["userId"]})],
)

# One sync per account at a time: a change that arrives while one runs is skipped.
crm_sync = define_workflow(
    name="crm-sync",
    trigger=on_event("crm.changed"),
    singleton=Singleton(Event.payload["accountId"], mode="skip"),
    steps=lambda s: [s.wait(for_="PT10M"), s.return_({"synced": Event.payload["accountId"]})],
)
