"""`wfr dispatches`: failed deliveries across tenants, and redelivering them."""

from __future__ import annotations

import random
from datetime import timedelta

from cli_support import OTHER_TENANT, T0, TENANT, Cli, send
from workflow_runner.aws.inprocess import CapturedMailer, RecordingHttpSender
from workflow_runner.engine.dispatcher import dispatch_pending
from workflow_runner.ports import HttpResponse
from workflow_runner.store import Store
from workflow_runner.webhook_guard import WebhookGuard

SIGNUP = {"userId": "u-1", "email": "ada@example.com", "name": "Ada"}
NOW = (T0 + timedelta(minutes=1)).isoformat()


def _fail_all(store: Store) -> None:
    """Run the dispatcher with a mail provider that rejects everything for good."""
    from workflow_runner.ports import PermanentDeliveryError

    class Rejecting(CapturedMailer):
        def send_mail(self, *args: object) -> str:
            raise PermanentDeliveryError("SES MessageRejected")

    dispatch_pending(
        store,
        lambda: T0,
        Rejecting(),
        RecordingHttpSender(respond=lambda r: HttpResponse(200)),
        WebhookGuard(resolver=lambda h, p: ["93.184.215.14"]),
        mail_sender="noreply@example.com",
        rng=random.Random(1),
    )


def test_failed_deliveries_are_listed_across_tenants(cli: Cli, store: Store) -> None:
    send(store, "user.signed-up", SIGNUP, tenant=TENANT)
    send(store, "user.signed-up", {**SIGNUP, "userId": "u-2"}, tenant=OTHER_TENANT)
    _fail_all(store)
    listed = cli(
        "dispatches", "list", "--status", "failed", "--since", "P1D", "--now", NOW, "--json"
    )
    assert listed.code == 0, listed.err
    rows = listed.json()
    assert {r["tenantId"] for r in rows} == {TENANT, OTHER_TENANT}
    assert {(r["status"], r["reason"], r["error"]) for r in rows} == {
        ("failed", "rejected", "mail delivery failed")
    }
    only = cli("dispatches", "list", "--tenant", TENANT, "--now", NOW, "--json").json()
    assert [r["tenantId"] for r in only] == [TENANT]
    text = cli("dispatches", "list", "--now", NOW).out
    assert "mail.send" in text and "rejected" in text


def test_a_failed_delivery_is_redelivered_once_asked(cli: Cli, store: Store) -> None:
    send(store, "user.signed-up", SIGNUP)
    _fail_all(store)
    (row,) = cli("dispatches", "list", "--now", NOW, "--json").json()
    done = cli("dispatches", "redeliver", row["requestId"], "--tenant", TENANT, "--now", NOW)
    assert done.code == 0, done.err
    assert "redelivering" in done.out
    again = store.outbox.get(TENANT, row["requestId"])
    assert again is not None
    assert (again.status, again.attempts, again.failure_reason) == ("pending", 0, None)
    mailer = CapturedMailer()
    dispatch_pending(
        store,
        lambda: T0 + timedelta(minutes=2),
        mailer,
        RecordingHttpSender(),
        WebhookGuard(resolver=lambda h, p: ["93.184.215.14"]),
        mail_sender="noreply@example.com",
    )
    assert [m.request_id for m in mailer.sent] == [row["requestId"]]
    types = [e.type for e in store.streams.load(TENANT, row["requestId"])]
    assert types == [
        "step.dispatch-requested",
        "step.dispatch-failed",
        "step.dispatch-requested",  # the redelivery, on the same stream
        "step.dispatched",
    ]
    # A delivered request cannot be redelivered: the action did not happen, exit 1.
    refused = cli("dispatches", "redeliver", row["requestId"], "--tenant", TENANT)
    assert refused.code == 1 and "only failed ones" in refused.err


def test_redeliver_all_takes_every_failed_one_of_the_filters(cli: Cli, store: Store) -> None:
    send(store, "user.signed-up", SIGNUP, tenant=TENANT)
    send(store, "user.signed-up", {**SIGNUP, "userId": "u-2"}, tenant=OTHER_TENANT)
    _fail_all(store)
    result = cli("dispatches", "redeliver", "--all", "--tenant", TENANT, "--now", NOW, "--json")
    assert result.code == 0
    assert [r["tenantId"] for r in result.json()["redelivered"]] == [TENANT]
    left = cli("dispatches", "list", "--now", NOW, "--json").json()
    assert [r["tenantId"] for r in left] == [OTHER_TENANT]


def test_redeliver_needs_an_id_or_all(cli: Cli) -> None:
    assert cli("dispatches", "redeliver").code == 2
