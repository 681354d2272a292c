"""Limits on mail_send and webhook_send (concurrency= and throttle=, with result_key):
the same admission as a task's attempts, in the test kit with time travel, on real
PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from workflow_runner import (
    Concurrency,
    Event,
    Steps,
    Throttle,
    define_workflow,
    on_event,
    run_id_for,
)
from workflow_runner.flow.tasks import claim_within_limits
from workflow_runner.testing import WorkflowTestEnv

from tests.support import TENANT_A, TENANT_B

MakeEnv = Callable[..., WorkflowTestEnv]
HOOK = "https://crm.example.com/hooks/contact"

SYNC = define_workflow(
    name="crm-sync",
    trigger=on_event("contact.changed"),
    idempotency_key=Event.payload["contactId"],
    steps=lambda s: [
        s.webhook_send(
            url=HOOK,
            body=Event.payload,
            result_key="pushed",
            throttle=Throttle(1, "PT1M", key=Event.payload["accountId"]),
        ),
        s.return_(Steps["pushed"]),
    ],
    register=False,
)

NOTIFY = define_workflow(
    name="notify",
    trigger=on_event("invoice.issued"),
    idempotency_key=Event.payload["invoiceId"],
    steps=lambda s: [
        s.mail_send(
            to="billing@example.com",
            subject="Invoice issued",
            body="-",
            result_key="mailed",
            concurrency=Concurrency(1, key=Event.payload["accountId"]),
            throttle=Throttle(1, "PT10S", key=Event.payload["accountId"]),
        ),
        s.return_(Steps["mailed"]),
    ],
    register=False,
)


def _contact(n: int, account: str) -> dict[str, str]:
    return {"contactId": f"c{n}", "accountId": account}


def test_a_throttled_webhook_goes_out_once_a_minute_per_key_and_never_delays_another_key(
    make_env: MakeEnv,
) -> None:
    env = make_env(workflows=[SYNC])
    env.stub_webhook(HOOK, 200)
    for n in range(3):
        env.put_event(tenant=TENANT_A, type="contact.changed", payload=_contact(n, "a"))
    env.put_event(tenant=TENANT_A, type="contact.changed", payload=_contact(9, "b"))
    env.put_event(tenant=TENANT_B, type="contact.changed", payload=_contact(0, "a"))

    # the first of account a, account b's and tenant B's (the key is per tenant) went out
    sent = env.webhooks
    assert sorted(w.body["contactId"] for w in sent) == ["c0", "c0", "c9"]

    env.advance("PT59S")
    assert len(env.webhooks) == 3  # the next turn of account a is a minute after the first
    env.advance("PT1S")
    assert len(env.webhooks) == 4
    env.advance("PT1M")
    sent = env.webhooks
    assert len(sent) == 5
    a_times = sorted(
        w.sent_at for w in sent if w.body["accountId"] == "a" and w.body["contactId"] != "c0"
    )
    assert a_times[1] - a_times[0] >= timedelta(minutes=1)
    runs = env.runs(tenant=TENANT_A, workflow="crm-sync")
    assert {r.status for r in runs} == {"completed"}


def test_a_mail_limited_to_one_at_a_time_waits_for_a_dead_senders_lease(
    make_env: MakeEnv,
) -> None:
    env = make_env(workflows=[NOTIFY])
    invoice = {"invoiceId": "i0", "accountId": "a"}
    env.put_event(tenant=TENANT_A, type="invoice.issued", payload=invoice)
    env.put_event(tenant=TENANT_A, type="invoice.issued", payload={**invoice, "invoiceId": "i1"})
    assert len(env.mails) == 1  # i0's; i1's waits for its turn (10 s)
    # Given: at i1's turn a sender claims its send (its slot with it) and dies
    turn = env.now + timedelta(seconds=10)
    dead = claim_within_limits(
        env.store, lambda: env.store.tasks.claim(turn, 600_000, 10_000, 5.0), lambda: turn
    )
    assert dead is not None and dead.run_id == run_id_for("notify", "i1")
    # When: a third invoice of the account arrives, and one of another account
    env.put_event(tenant=TENANT_A, type="invoice.issued", payload={**invoice, "invoiceId": "i2"})
    other = {"invoiceId": "i9", "accountId": "b"}
    env.put_event(tenant=TENANT_A, type="invoice.issued", payload=other)
    assert env.run(tenant=TENANT_A, workflow="notify", key="i9").status == "completed"

    env.advance("PT2M")  # beyond the dead sender's lease

    # Then: i2's mail went out only once the lease had ended (one send at a time per
    # account), and i1's was sent again
    i2 = env.run(tenant=TENANT_A, workflow="notify", key="i2")
    assert i2.status == "completed"
    completed_at = next(e.recorded_at for e in i2.events if e.type == "workflow.task.completed")
    assert completed_at >= dead.leased_until
    assert env.run(tenant=TENANT_A, workflow="notify", key="i1").status == "completed"
