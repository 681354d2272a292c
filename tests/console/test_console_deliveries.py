"""The console's failed deliveries: listed across tenants, redelivered after a
confirmation, the redelivery recorded on the run's stream as an operator action."""

from __future__ import annotations

import random
import re
from datetime import timedelta

import pytest
from console_support import T0, console, send
from workflow_runner.aws.inprocess import CapturedMailer, RecordingHttpSender
from workflow_runner.engine.deliveries import RedeliveryRefused
from workflow_runner.engine.dispatcher import dispatch_pending
from workflow_runner.engine.operator_actions import Operator, redeliver_as_operator
from workflow_runner.ports import HttpResponse, PermanentDeliveryError
from workflow_runner.store import Store
from workflow_runner.webhook_guard import WebhookGuard

from tests.support import TENANT_A, TENANT_B


class Rejecting(CapturedMailer):
    def send_mail(self, *args: object) -> str:
        raise PermanentDeliveryError("SES MessageRejected")


def _fail_every_mail(store: Store) -> None:
    dispatch_pending(
        store,
        lambda: T0,
        Rejecting(),
        RecordingHttpSender(respond=lambda r: HttpResponse(200)),
        WebhookGuard(resolver=lambda h, p: ["93.184.215.14"]),
        mail_sender="noreply@example.com",
        rng=random.Random(1),
    )


@pytest.fixture
def failed(store: Store) -> dict[str, str]:
    """The welcome mail of one sign-up per tenant, rejected for good; business time is
    a minute later."""
    runs = {
        TENANT_A: send(store, "user.signed-up", {"userId": "a", "email": "a@example.com"}),
        TENANT_B: send(
            store, "user.signed-up", {"userId": "b", "email": "b@example.com"}, tenant=TENANT_B
        ),
    }
    _fail_every_mail(store)
    store.local.set_clock(T0 + timedelta(minutes=1))
    return runs


def _requests(text: str) -> list[str]:
    return re.findall(r'<code title="([0-9a-f-]{36})" class="id">', text.split("<tbody>")[1])


def test_failed_deliveries_are_listed_across_tenants(
    db_url: str, store: Store, failed: dict[str, str]
) -> None:
    client = console(db_url)
    page = client.get("/deliveries")
    assert page.status == 200
    assert "mail.send" in page.text and "rejected" in page.text
    for tenant, run_id in failed.items():
        assert f'href="/runs/{run_id}?tenant={tenant}"' in page.text
    assert 'data-action="redeliver"' not in page.text  # read-only
    assert client.get("/deliveries", status="pending").text.count("<tbody>") == 0
    only_b = client.get("/deliveries", tenant=TENANT_B).text
    assert failed[TENANT_B] in only_b and failed[TENANT_A] not in only_b
    assert client.get("/deliveries", status="lost").status == 400


def test_a_failed_delivery_is_redelivered_after_confirmation(
    db_url: str, store: Store, failed: dict[str, str]
) -> None:
    client = console(db_url, allow_actions=True)
    listing = client.get("/deliveries").text
    link = re.search(r'href="(/deliveries/([0-9a-f-]{36})/redeliver)\?tenant=' + TENANT_A, listing)
    assert link is not None
    path, request_id = link.group(1), link.group(2)
    confirm = client.get(path, tenant=TENANT_A)
    assert confirm.status == 200 and "Deliver this again?" in confirm.text
    assert client.post(path, {"tenant": TENANT_A}).status == 403  # no token, nothing done
    done = client.post(path, {"tenant": TENANT_A, "csrf": confirm.csrf(), "reason": "SES fixed"})
    assert done.status == 303 and done.location == "/deliveries?done=redelivered"
    # On a local database the nudged dispatcher sent it at once (into the local mailbox).
    row = store.outbox.get(TENANT_A, request_id)
    assert row is not None and row.status == "dispatched"
    assert [e.type for e in store.streams.load(TENANT_A, request_id)][-2:] == [
        "step.dispatch-requested",
        "step.dispatched",
    ]
    assert [m.recipients for m in store.local.mail()] == [["a@example.com"]]
    run_events = store.streams.load(TENANT_A, failed[TENANT_A])
    assert run_events[-1].type == "workflow.operator-action"
    assert run_events[-1].payload == {
        "action": "redeliver",
        "by": run_events[-1].payload["by"],
        "reason": "SES fixed",
        "requestId": request_id,
    }
    summary = store.runs.get(TENANT_A, failed[TENANT_A])
    assert summary is not None and summary.version == run_events[-1].version
    # The run page offers it no more, and a second redelivery is refused, writing nothing.
    assert 'data-action="redeliver"' not in client.get(f"/runs/{failed[TENANT_A]}").text
    again = client.post(path, {"tenant": TENANT_A, "csrf": confirm.csrf()})
    assert again.status == 409 and "only failed ones" in again.text
    assert len(store.streams.load(TENANT_A, failed[TENANT_A])) == len(run_events)


def test_a_refused_redelivery_records_nothing(store: Store, failed: dict[str, str]) -> None:
    before = len(store.streams.load(TENANT_A, failed[TENANT_A]))
    with pytest.raises(RedeliveryRefused, match="no delivery"):
        redeliver_as_operator(
            store, TENANT_A, "00000000-0000-4000-8000-000000000000", T0, Operator("t")
        )
    assert len(store.streams.load(TENANT_A, failed[TENANT_A])) == before
