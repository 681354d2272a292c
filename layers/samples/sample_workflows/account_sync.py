"""Push an account's changes to a CRM whose API allows 10 calls a minute per account.

A burst of edits syncs once (a debounce per account: the run starts two minutes after
the last edit, with that edit's revision), and the CRM call is throttled per account
(10 a minute, one at a time), so a bulk import queues its calls instead of meeting 429s.
"""

from __future__ import annotations

from workflow_runner import (
    Concurrency,
    Debounce,
    Event,
    StepContext,
    Steps,
    Throttle,
    define_workflow,
    on_event,
)


def push_to_crm(ctx: StepContext) -> dict[str, object]:
    """The CRM call (simulated): the account's latest revision."""
    return {"accountId": ctx.event.payload["accountId"], "revision": ctx.event.payload["revision"]}


account_sync = define_workflow(
    name="account-sync",
    trigger=on_event("account.updated"),
    debounce=Debounce("PT2M", key=Event.payload["accountId"], timeout="PT10M"),
    steps=lambda s: [
        s.task(
            "pushed",
            push_to_crm,
            throttle=Throttle(10, "PT1M", key=Event.payload["accountId"]),
            concurrency=Concurrency(1, key=Event.payload["accountId"]),
        ),
        s.return_({"isSuccess": True, "revision": Steps["pushed"]["revision"]}),
    ],
)
