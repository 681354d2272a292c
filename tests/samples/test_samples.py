"""The seeds' in-memory sample tests (seeds/002), on the test kit: the Lambda handlers of
template.yaml on PostgreSQL, time moved with `advance`."""

from __future__ import annotations

import pytest
import sample_workflows
from workflow_runner import DomainEvent
from workflow_runner import stream as ev
from workflow_runner.definition.dsl import CronTrigger, EventTrigger
from workflow_runner.testing import CallbackRefused, RunSnapshot, SentMail, WorkflowTestEnv

from tests.support import TENANT_A

SIGNUP = {"email": "x@example.com", "userId": "active-42"}


def test_sample_definitions_have_the_seed_triggers_and_keys() -> None:
    onboarding = sample_workflows.user_onboarding
    assert (
        isinstance(onboarding.trigger, EventTrigger)
        and onboarding.trigger.event_type == "user.signed-up"
    )
    assert onboarding.key_for(DomainEvent("e", "user.signed-up", {"userId": "user_123"}, "t")) == (
        "onboarding:user_123"
    )
    assert isinstance(sample_workflows.webhook_delivery.trigger, EventTrigger)
    assert sample_workflows.webhook_delivery.trigger.event_type == "data.processed"
    daily = sample_workflows.daily_report.trigger
    assert isinstance(daily, CronTrigger) and daily.schedule == "0 9 * * *"


def test_onboarding_engaged_user_suspends_then_resumes_into_the_tips_mail(
    env: WorkflowTestEnv,
) -> None:
    env.put_event(tenant=TENANT_A, type="user.signed-up", payload=SIGNUP)
    run = env.run(tenant=TENANT_A, workflow="user-onboarding", key="onboarding:active-42")

    assert run.event_types == [ev.RUN_STARTED, ev.STEP_WAITING]
    assert [m.subject for m in env.mails] == ["Welcome!"]
    waiting = run.events[1].payload
    assert waiting["definitionFingerprint"] == sample_workflows.user_onboarding.fingerprint
    assert "x@example.com" not in str([e.payload for e in run.events])  # referenced, not copied

    env.advance("P1D")

    run = env.run(tenant=TENANT_A, workflow="user-onboarding", key="onboarding:active-42")
    assert run.event_types == [ev.RUN_STARTED, ev.STEP_WAITING, ev.STEP_RESUMED, ev.STEP_WAITING]
    assert [m.subject for m in env.mails] == ["Welcome!", "Engagement tips"]

    env.advance("P7D")

    run = env.run(tenant=TENANT_A, workflow="user-onboarding", key="onboarding:active-42")
    assert run.status == "completed"
    [hook] = [w for w in env.webhooks if w.url.endswith("/crm-onboarding")]
    assert hook.body == {"userId": "active-42", "stage": "day8"}


def test_onboarding_cold_user_gets_the_reminder_branch(env: WorkflowTestEnv) -> None:
    env.put_event(
        tenant=TENANT_A, type="user.signed-up", payload={"email": "c@example.com", "userId": "c-1"}
    )
    env.advance("P1D")
    assert [m.subject for m in env.mails] == ["Welcome!", "Getting started"]


def test_order_approval_approved_by_id_confirms_and_fulfils(env: WorkflowTestEnv) -> None:
    order = {"orderId": "o-7", "email": "o@example.com", "total": 30}
    env.put_event(tenant=TENANT_A, type="order.placed", payload=order)
    other = {"orderId": "o-8", "approver": "eve"}
    env.put_event(tenant=TENANT_A, type="order.approved", payload=other)
    assert env.run(tenant=TENANT_A, workflow="order-approval", key="o-7").status == "waiting"

    env.put_event(
        tenant=TENANT_A, type="order.approved", payload={"orderId": "o-7", "approver": "ada"}
    )

    run = env.run(tenant=TENANT_A, workflow="order-approval", key="o-7")
    assert (run.status, run.steps["order.approved"]["approver"]) == ("completed", "ada")
    assert [m.subject for m in env.mails] == ["We received your order", "Your order is approved"]
    assert [w.body for w in env.webhooks] == [{"orderId": "o-7", "approvedBy": "ada"}]


def test_order_approval_times_out_as_a_returned_failure(env: WorkflowTestEnv) -> None:
    env.put_event(
        tenant=TENANT_A,
        type="order.placed",
        payload={"orderId": "o-9", "email": "o@example.com", "total": 30},
    )
    env.advance("P3D")
    run = env.run(tenant=TENANT_A, workflow="order-approval", key="o-9")
    assert (run.status, run.reason) == ("failed", "returned_failure")
    assert run.steps["order.approved"] is None


def test_order_approval_ignores_orders_without_a_total(env: WorkflowTestEnv) -> None:
    env.put_event(tenant=TENANT_A, type="order.placed", payload={"orderId": "o-0", "total": 0})
    assert env.runs(tenant=TENANT_A) == []


def test_webhook_delivery_is_a_task_whose_answer_the_run_returns(env: WorkflowTestEnv) -> None:
    payload = {"data": {"id": 7}, "webhookUrl": "https://hooks.example.com/in"}
    env.put_event(tenant=TENANT_A, type="data.processed", payload=payload)
    [run] = env.runs(tenant=TENANT_A, workflow="webhook-delivery")
    assert run.event_types == [
        ev.RUN_STARTED,
        ev.TASK_SCHEDULED,
        ev.TASK_COMPLETED,
        ev.STEP_RESUMED,
        ev.RUN_COMPLETED,
    ]
    [hook] = env.webhooks
    assert (hook.url, hook.body, hook.status) == ("https://hooks.example.com/in", {"id": 7}, 200)
    assert run.steps["partner"] == {"status": 200, "body": ""}
    assert run.result == {"isSuccess": True, "partner": ""}
    assert env.mails == []


def test_webhook_delivery_retries_a_failing_partner_with_one_request_id(
    env: WorkflowTestEnv,
) -> None:
    env.stub_webhook("https://hooks.example.com/in", 503, None, 200)
    payload = {"data": {"id": 7}, "webhookUrl": "https://hooks.example.com/in"}
    env.put_event(tenant=TENANT_A, type="data.processed", payload=payload)
    assert env.run(tenant=TENANT_A, workflow="webhook-delivery").status == "waiting"
    env.advance("PT1M")  # backoff 10 s, then 20 s
    run = env.run(tenant=TENANT_A, workflow="webhook-delivery")
    assert [w.status for w in env.webhooks] == [503, None, 200]
    assert len({w.idempotency_key for w in env.webhooks}) == 1
    assert (run.status, run.result) == ("completed", {"isSuccess": True, "partner": ""})


def test_webhook_delivery_that_fails_for_good_tells_ops_and_fails_the_run(
    env: WorkflowTestEnv,
) -> None:
    env.stub_webhook("https://hooks.example.com/in", 410)
    payload = {"data": {"id": 7}, "webhookUrl": "https://hooks.example.com/in"}
    env.put_event(tenant=TENANT_A, type="data.processed", payload=payload)
    run = env.run(tenant=TENANT_A, workflow="webhook-delivery")
    assert (run.status, run.reason) == ("failed", "returned_failure")
    assert run.steps["partner"]["failed"] is True and run.steps["partner"]["attempts"] == 1
    [mail] = env.mails
    assert (mail.to, mail.subject) == (["ops@example.com"], "A webhook could not be delivered")
    assert "https://hooks.example.com/in" in mail.body


def test_daily_report_cron_run_starts_once_per_scheduled_instant(env: WorkflowTestEnv) -> None:
    env.put_event(tenant=TENANT_A, type="user.signed-up", payload=SIGNUP)  # the tenant is seen
    env.advance("P2D")
    reports = env.runs(tenant=TENANT_A, workflow="daily-report")
    assert [r.status for r in reports] == ["completed", "completed"]
    daily = [w.body for w in env.webhooks if w.url.endswith("/daily-report")]
    assert daily == [
        {"scheduledAt": "2026-01-06T09:00:00.000000Z"},
        {"scheduledAt": "2026-01-07T09:00:00.000000Z"},
    ]


def test_inventory_sync_retries_twice_then_succeeds(env: WorkflowTestEnv) -> None:
    payload = {"sku": "A-1", "revision": 3, "failAttempts": 2}
    env.put_event(tenant=TENANT_A, type="inventory.changed", payload=payload)
    env.advance("PT15M")
    run = env.run(tenant=TENANT_A, workflow="inventory-sync", key="A-1:3")
    assert run.event_types.count(ev.RETRY_SCHEDULED) == 2
    assert run.status == "completed"
    attempts = [e.payload["attempt"] for e in run.events if e.type == ev.RETRY_SCHEDULED]
    assert attempts == [1, 2]
    [hook] = env.webhooks
    assert hook.body == {"sku": "A-1", "attempt": 3}


BATCH = {
    "batchId": "b-7",
    "orders": [
        {"orderId": f"o-{n}", "email": f"c{n}@example.com", "outOfStock": n == 3} for n in range(8)
    ],
}


SUMMARY = {"batchId": "b-7", "fulfilled": 7, "failed": 1}


def _finance_mail(env: WorkflowTestEnv) -> SentMail:
    (mail,) = [m for m in env.mails if m.to == ["finance@example.com"]]
    return mail


def test_batch_fulfilment_maps_orders_onto_child_runs_five_at_a_time(
    env: WorkflowTestEnv,
) -> None:
    env.put_event(tenant=TENANT_A, type="batch.submitted", payload=BATCH)
    batch = env.run(tenant=TENANT_A, workflow="batch-fulfilment", key="b-7")
    assert (batch.status, batch.waiting_for) == ("waiting", "workflow.callback")
    orders = batch.steps["orders"]
    assert [o.get("orderId") for o in orders] == [f"o-{n}" if n != 3 else None for n in range(8)]
    failed = orders[3]
    assert failed["failed"] is True and failed["reason"] == "task_failed"
    child = env.run(tenant=TENANT_A, workflow="fulfil-order", key="b-7:o-3")
    assert (child.run_id, child.status) == (failed["runId"], "failed")
    assert child.events[0].payload["parentRunId"] == batch.run_id
    customers = [m.to[0] for m in env.mails if m.to != ["finance@example.com"]]
    assert sorted(customers) == sorted(f"c{n}@example.com" for n in range(8) if n != 3)
    [report] = [w for w in env.webhooks if w.url.endswith("/batches")]
    assert report.body == SUMMARY


def test_batch_fulfilment_asks_finance_and_invoices_what_they_approve(
    env: WorkflowTestEnv,
) -> None:
    env.put_event(tenant=TENANT_A, type="batch.submitted", payload=BATCH)
    mail = _finance_mail(env)
    assert mail.subject == "Approve the invoice run of batch b-7?"
    assert "Batch b-7: 7 orders fulfilled, 1 failed." in mail.body
    assert "wfr callbacks complete wfrcb_" in mail.body  # no endpoint in the test kit

    env.complete_callback(mail.body, {"approved": True, "by": "dana"})

    batch = env.run(tenant=TENANT_A, workflow="batch-fulfilment", key="b-7")
    assert batch.status == "completed"
    assert batch.result == {"isSuccess": True, **SUMMARY, "invoiced": True}
    [invoice] = [w for w in env.webhooks if w.url.endswith("/invoices")]
    assert invoice.body == {**SUMMARY, "approval": {"approved": True, "by": "dana"}}


def test_batch_fulfilment_does_not_invoice_a_rejected_batch(env: WorkflowTestEnv) -> None:
    env.put_event(tenant=TENANT_A, type="batch.submitted", payload=BATCH)
    env.complete_callback(_finance_mail(env).body, {"approved": False})
    batch = env.run(tenant=TENANT_A, workflow="batch-fulfilment", key="b-7")
    assert (batch.status, batch.result) == (
        "completed",
        {"isSuccess": True, **SUMMARY, "invoiced": False},
    )
    assert not [w for w in env.webhooks if w.url.endswith("/invoices")]


def test_batch_fulfilment_without_an_answer_in_two_days_fails(env: WorkflowTestEnv) -> None:
    env.put_event(tenant=TENANT_A, type="batch.submitted", payload=BATCH)
    env.advance("P2D")
    batch = env.run(tenant=TENANT_A, workflow="batch-fulfilment", key="b-7")
    assert (batch.status, batch.reason) == ("failed", "returned_failure")
    assert batch.result == {
        "isSuccess": False,
        **SUMMARY,
        "error": "finance did not answer within 2 days",
    }
    with pytest.raises(CallbackRefused, match="expired"):
        env.complete_callback(_finance_mail(env).body, {"approved": True})


def test_batch_fulfilment_mails_the_endpoints_link_where_one_is_deployed(
    pg_server_url: str,
) -> None:
    base = "https://abc.lambda-url.eu-central-1.on.aws/"
    with WorkflowTestEnv(
        modules=["sample_workflows"],
        now="2026-01-05T09:00:00Z",
        database_url=pg_server_url,
        environ={"CALLBACK_BASE_URL": base},
    ) as env:
        env.put_event(tenant=TENANT_A, type="batch.submitted", payload=BATCH)
        body = _finance_mail(env).body
        assert f'POST {{"approved": true}} (or false) to {base}wfrcb_' in body
        env.complete_callback(body, {"approved": True})
        assert env.run(tenant=TENANT_A, workflow="batch-fulfilment", key="b-7").result == {
            "isSuccess": True,
            **SUMMARY,
            "invoiced": True,
        }


PARCEL = {"parcelId": "p-1", "weightKg": 2}


def _quote(env: WorkflowTestEnv, **parcel: object) -> RunSnapshot:
    env.put_event(tenant=TENANT_A, type="parcel.ready", payload={**PARCEL, **parcel})
    env.advance("PT1M")
    return env.run(tenant=TENANT_A, workflow="shipping-quote", key="p-1")


def test_shipping_quote_books_the_cheapest_of_three_carriers(env: WorkflowTestEnv) -> None:
    run = _quote(env)
    assert run.steps["quotes"] == {
        "results": [
            {"carrier": "parcelco", "priceCents": 240},
            {"carrier": "fastship", "priceCents": 190},
            {"carrier": "slowpost", "priceCents": 160},
        ],
        "failures": [],
        "succeeded": 3,
        "failed": 0,
        "completion": "all_completed",
    }
    assert run.result == {
        "isSuccess": True,
        "parcelId": "p-1",
        "carrier": "slowpost",
        "priceCents": 160,
        "quoted": 3,
        "refused": [],
    }
    [booking] = [w for w in env.webhooks if w.url.endswith("/shipments")]
    assert booking.body == {"parcelId": "p-1", "carrier": "slowpost", "priceCents": 160}


def test_shipping_quote_tolerates_one_carrier_that_cannot_quote(env: WorkflowTestEnv) -> None:
    run = _quote(env, carriersDown=["slowpost"])
    assert run.status == "completed"
    quotes = run.steps["quotes"]
    assert quotes["results"][2] is None
    assert quotes["failures"] == [
        {
            "index": 2,
            "reason": "non_retryable",  # not in retry_on: asked once
            "taskKey": "slowpost",
            "error": "CarrierUnavailable",
        }
    ]
    assert (quotes["succeeded"], quotes["failed"]) == (2, 1)
    assert run.result["carrier"] == "fastship" and run.result["refused"] == ["slowpost"]


def test_shipping_quote_fails_when_a_second_carrier_cannot_quote(env: WorkflowTestEnv) -> None:
    run = _quote(env, carriersDown=["parcelco", "slowpost"])
    assert (run.status, run.reason) == ("failed", "failure_tolerance_exceeded")
    assert not [w for w in env.webhooks if w.url.endswith("/shipments")]


def test_shipping_quote_asks_a_carrier_that_timed_out_again(env: WorkflowTestEnv) -> None:
    run = _quote(env, carriersSlow=["slowpost"])
    assert run.result["carrier"] == "slowpost"  # answered on its second attempt
    assert run.steps["quotes"]["succeeded"] == 3


# --- freight-quotes: callbacks created at once, awaited one after the other ---------------------

SHIPMENT = {"shipmentId": "s-9", "weightKg": 120}


def _carrier_links(env: WorkflowTestEnv) -> dict[str, str]:
    """What each carrier's quote request carried: where to answer."""
    return {
        w.url.rsplit("/", 1)[-1]: w.body["answerTo"] for w in env.webhooks if "/carriers/" in w.url
    }


def test_freight_quotes_asks_both_carriers_each_with_its_own_callback(
    env: WorkflowTestEnv,
) -> None:
    env.put_event(tenant=TENANT_A, type="shipment.ready", payload=SHIPMENT)
    links = _carrier_links(env)
    assert sorted(links) == ["bay_haulage", "north_freight"]
    assert all(link.startswith("wfrcb_") for link in links.values())  # no endpoint here
    assert links["bay_haulage"] != links["north_freight"]
    run = env.run(tenant=TENANT_A, workflow="freight-quotes", key="s-9")
    assert (run.status, run.waiting_for) == ("waiting", "workflow.callback")


def test_freight_quotes_keeps_an_early_quote_and_books_the_cheapest(env: WorkflowTestEnv) -> None:
    env.put_event(tenant=TENANT_A, type="shipment.ready", payload=SHIPMENT)
    links = _carrier_links(env)
    # The second carrier answers first: the run still awaits the first, the quote is kept.
    env.complete_callback(links["bay_haulage"], {"price": 310})
    assert env.run(tenant=TENANT_A, workflow="freight-quotes", key="s-9").status == "waiting"
    env.complete_callback(links["north_freight"], {"price": 295})
    run = env.run(tenant=TENANT_A, workflow="freight-quotes", key="s-9")
    booking = {"shipmentId": "s-9", "carrier": "north_freight", "price": 295}
    assert (run.status, run.result) == ("completed", {"isSuccess": True, **booking, "declined": []})
    [booked] = [w for w in env.webhooks if w.url.endswith("/bookings")]
    assert booked.body == booking


def test_freight_quotes_catches_a_carrier_that_declines(env: WorkflowTestEnv) -> None:
    env.put_event(tenant=TENANT_A, type="shipment.ready", payload=SHIPMENT)
    links = _carrier_links(env)
    env.complete_callback(links["bay_haulage"], {"price": 310})
    env.fail_callback(links["north_freight"], error="NoCapacity", message="fleet fully booked")
    run = env.run(tenant=TENANT_A, workflow="freight-quotes", key="s-9")
    assert run.result == {
        "isSuccess": True,
        "shipmentId": "s-9",
        "carrier": "bay_haulage",
        "price": 310,
        "declined": ["north_freight"],
    }
    assert run.steps["north_freight"] == {"failed": True, "error": "NoCapacity"}


def test_freight_quotes_without_any_quote_in_a_day_fails(env: WorkflowTestEnv) -> None:
    env.put_event(tenant=TENANT_A, type="shipment.ready", payload=SHIPMENT)
    links = _carrier_links(env)
    env.fail_callback(links["bay_haulage"], error="NoCapacity")
    env.advance("P1D")
    run = env.run(tenant=TENANT_A, workflow="freight-quotes", key="s-9")
    assert (run.status, run.reason) == ("failed", "returned_failure")
    assert run.result == {
        "isSuccess": False,
        "error": "no carrier quoted within a day",
        "declined": ["bay_haulage"],
    }
    assert not [w for w in env.webhooks if w.url.endswith("/bookings")]
    with pytest.raises(CallbackRefused, match="expired"):
        env.complete_callback(links["north_freight"], {"price": 280})


def test_account_sync_syncs_a_burst_of_edits_once_with_the_last_revision(
    env: WorkflowTestEnv,
) -> None:
    for revision in range(1, 6):
        env.put_event(
            tenant=TENANT_A,
            type="account.updated",
            payload={"accountId": "acme", "revision": revision},
        )
        env.advance("PT1M")  # each edit within the two quiet minutes of the last
    [held] = env.runs(tenant=TENANT_A, workflow="account-sync")
    assert held.status == "waiting"  # held by the debounce: no CRM call yet

    env.advance("PT2M")

    [run] = env.runs(tenant=TENANT_A, workflow="account-sync")
    assert run.status == "completed" and run.result == {"isSuccess": True, "revision": 5}


def test_account_sync_calls_the_crm_ten_times_a_minute_per_account(env: WorkflowTestEnv) -> None:
    # a bulk import: 30 accounts' edits, each its own debounce key; the CRM limit is per
    # account, so every account syncs once, none waits for another's turn
    for n in range(30):
        env.put_event(
            tenant=TENANT_A, type="account.updated", payload={"accountId": f"a{n}", "revision": 1}
        )
    env.advance("PT2M")
    runs = env.runs(tenant=TENANT_A, workflow="account-sync")
    assert len(runs) == 30 and {r.status for r in runs} == {"completed"}

    # one account edited again and again beyond the debounce's ten-minute bound: each
    # bound starts a run, and their CRM calls keep to the account's turns
    for minute in range(25):
        env.put_event(
            tenant=TENANT_A,
            type="account.updated",
            payload={"accountId": "a0", "revision": 2 + minute},
        )
        env.advance("PT1M")
    env.advance("PT3M")
    a0 = [
        r
        for r in env.runs(tenant=TENANT_A, workflow="account-sync")
        if r.status == "completed" and r.result["revision"] > 1
    ]
    assert len(a0) >= 2  # the timeout bounded the delay: it did not wait for quiet
