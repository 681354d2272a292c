"""The sample workflows driven to completion through the serverless bundle: events
routed by the EventPatterns of template.yaml, real handlers, real PostgreSQL, the
in-memory resume queue honouring SQS delays, and a manual clock."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from workflow_runner import ManualClock, run_id_for
from workflow_runner import stream as ev
from workflow_runner.aws.inprocess import InProcessApp
from workflow_runner.aws.template import event_routes, load_template
from workflow_runner.ports import HttpResponse
from workflow_runner.store import Store

from tests.functions.helpers import OTHER_TENANT, TEMPLATE, TENANT
from tests.support import eventbridge

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def put(
    app: InProcessApp,
    detail_type: str,
    detail: dict[str, Any],
    tenant: str = TENANT,
    source: str = "com.example.app",
) -> dict[str, Any]:
    detail = {"tenantId": tenant, **detail}
    when = app.runtime.clock.now()
    return app.put_event(eventbridge(detail_type, detail, when=when, source=source, account=False))


def status(store: Store, run_id: str, tenant: str = TENANT) -> str:
    row = store.runs.get(tenant, run_id)
    assert row is not None
    return str(row.status)


def settled_at(store: Store, run_id: str, tenant: str = TENANT) -> datetime:
    return store.streams.load(tenant, run_id)[-1].recorded_at


def mails(app: InProcessApp) -> list[tuple[tuple[str, ...], str]]:
    return [(m.to, m.subject) for m in app.runtime.mailer.sent]  # type: ignore[attr-defined]


def hooks(app: InProcessApp, path: str = "") -> list[Any]:
    """Webhook requests made so far (optionally only those to URLs ending in ``path``).

    The daily-report cron workflow runs for every known tenant too, so tests that span
    a 09:00 filter by URL."""
    requests = app.runtime.http.requests  # type: ignore[attr-defined]
    return [r for r in requests if r.url.endswith(path)]


def test_user_onboarding_runs_eight_days_to_the_second(
    app: InProcessApp, store: Store, clock: ManualClock
) -> None:
    results = put(app, "user.signed-up", {"userId": "active-7", "email": "ada@example.com"})
    # Both rules match (default routing); the wakeup ignores a type nobody awaits.
    assert results["EventWakeupFunction"]["ignored"] is True
    run_id = run_id_for("user-onboarding", "onboarding:active-7")
    assert status(store, run_id) == "waiting"
    assert mails(app) == [(("ada@example.com",), "Welcome!")]

    app.advance(timedelta(days=1))
    assert mails(app)[1:] == [(("ada@example.com",), "Engagement tips")]
    resumed = [e for e in store.streams.load(TENANT, run_id) if e.type == ev.STEP_RESUMED]
    assert resumed[0].recorded_at == START + timedelta(days=1)  # on time, not at a tick
    assert hooks(app, "/crm-onboarding") == []

    app.advance(timedelta(days=7))
    assert status(store, run_id) == "completed"
    assert settled_at(store, run_id) == START + timedelta(days=8)
    (crm,) = hooks(app, "/crm-onboarding")
    assert crm.url == "https://hooks.example.com/crm-onboarding"
    assert crm.json() == {"userId": "active-7", "stage": "day8"}
    assert crm.headers["content-type"] == "application/json"
    assert uuid.UUID(crm.headers["idempotency-key"])


def test_onboarding_runs_of_two_tenants_never_mix(
    app: InProcessApp, store: Store, clock: ManualClock
) -> None:
    put(app, "user.signed-up", {"userId": "new-1", "email": "a@example.com"})
    put(app, "user.signed-up", {"userId": "new-1", "email": "b@example.com"}, tenant=OTHER_TENANT)
    app.advance(timedelta(days=8))
    run_id = run_id_for("user-onboarding", "onboarding:new-1")
    assert status(store, run_id) == status(store, run_id, OTHER_TENANT) == "completed"
    assert sorted(mails(app)) == sorted(
        [
            (("a@example.com",), "Welcome!"),
            (("b@example.com",), "Welcome!"),
            (("a@example.com",), "Getting started"),
            (("b@example.com",), "Getting started"),
        ]
    )


def test_webhook_delivery_retries_a_503_and_returns_the_partners_answer(
    app: InProcessApp, store: Store, clock: ManualClock
) -> None:
    answers = iter(
        [
            HttpResponse(503, {}),
            HttpResponse(200, {"content-type": "application/json"}, b'{"accepted": 3}'),
        ]
    )
    app.runtime.http.respond = lambda request: next(answers)  # type: ignore[attr-defined]
    put(
        app, "data.processed", {"webhookUrl": "https://partner.example.org/in", "data": {"rows": 3}}
    )
    (run,) = store.runs.for_tenant(TENANT, "webhook-delivery")
    assert run.status == "waiting"  # the first call answered 503; the retry is due in 10 s
    app.advance(timedelta(seconds=10))
    first, second = hooks(app)
    assert (first.url, first.json()) == ("https://partner.example.org/in", {"rows": 3})
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
    (run,) = store.runs.for_tenant(TENANT, "webhook-delivery")
    assert run.status == "completed"
    assert settled_at(store, run.run_id) == START + timedelta(seconds=10)
    completed = store.streams.load(TENANT, run.run_id)[-1]
    assert completed.payload["result"] == {"isSuccess": True, "partner": {"accepted": 3}}


def test_webhook_to_a_private_address_fails_the_task_and_the_run_tells_ops(
    app: InProcessApp, store: Store
) -> None:
    put(app, "data.processed", {"webhookUrl": "https://169.254.169.254/latest", "data": {}})
    assert hooks(app) == []
    (run,) = store.runs.for_tenant(TENANT, "webhook-delivery")
    assert run.status == "failed"
    events = store.streams.load(TENANT, run.run_id)
    assert ev.TASK_FAILED in [e.type for e in events]
    assert (events[-1].type, events[-1].payload["reason"]) == (ev.RUN_FAILED, "returned_failure")
    assert mails(app) == [(("ops@example.com",), "A webhook could not be delivered")]


def test_daily_report_runs_once_per_day_and_tenant(
    app: InProcessApp, store: Store, clock: ManualClock
) -> None:
    put(app, "user.signed-up", {"userId": "u1", "email": "x@example.com"})  # makes the tenant known
    app.tick()  # first sight: the schedule starts counting now (09:00, no backfill)
    app.advance(timedelta(hours=23, minutes=59))
    assert store.runs.for_tenant(TENANT, "daily-report") == []
    app.advance(timedelta(minutes=2))  # 09:01 on day two: the 09:00 run starts
    app.tick()
    (run,) = store.runs.for_tenant(TENANT, "daily-report")
    assert run.status == "completed"
    reports = hooks(app, "/daily-report")
    assert [h.json() for h in reports] == [{"scheduledAt": "2026-01-06T09:00:00.000000Z"}]
    app.advance(timedelta(days=1))
    assert len(store.runs.for_tenant(TENANT, "daily-report")) == 2


def test_order_approval_resumes_within_the_same_instant_as_the_approval(
    app: InProcessApp, store: Store, clock: ManualClock
) -> None:
    put(app, "order.placed", {"orderId": "o-1", "email": "grace@example.com", "total": 10})
    run_id = run_id_for("order-approval", "o-1")
    clock.advance(timedelta(hours=2))
    results = put(
        app, "order.approved", {"orderId": "o-2", "approver": "x"}, source="com.example.bo"
    )
    assert results["EventWakeupFunction"]["woken"] == []  # another order: no match
    results = put(
        app, "order.approved", {"orderId": "o-1", "approver": "lin"}, source="com.example.bo"
    )
    assert results["TriggerProjectionFunction"]["ignored"] is True
    assert results["EventWakeupFunction"]["enqueued"] == 1
    # No clock movement and no due-scan tick: the wakeup sent it straight to the queue.
    assert status(store, run_id) == "completed"
    assert settled_at(store, run_id) == START + timedelta(hours=2)
    assert mails(app) == [
        (("grace@example.com",), "We received your order"),
        (("grace@example.com",), "Your order is approved"),
    ]
    (fulfilment,) = hooks(app)
    assert fulfilment.json() == {"orderId": "o-1", "approvedBy": "lin"}


def test_order_approval_times_out_after_three_days_as_failed(
    app: InProcessApp, store: Store, clock: ManualClock
) -> None:
    put(app, "order.placed", {"orderId": "o-9", "email": "g@example.com", "total": 10})
    run_id = run_id_for("order-approval", "o-9")
    app.advance(timedelta(days=3))
    # An unapproved order ends as failed, by the workflow's own return value.
    assert status(store, run_id) == "failed"
    assert settled_at(store, run_id) == START + timedelta(days=3)
    failed = store.streams.load(TENANT, run_id)[-1]
    assert failed.payload["reason"] == "returned_failure"
    assert failed.payload["result"] == {"isSuccess": False, "error": "not approved within 3 days"}
    assert hooks(app, "/fulfilment") == []


def test_inventory_sync_retries_with_backoff_until_the_partner_accepts(
    app: InProcessApp, store: Store, clock: ManualClock
) -> None:
    put(app, "inventory.changed", {"sku": "SKU-9", "revision": 1, "failAttempts": 2})
    run_id = run_id_for("inventory-sync", "SKU-9:1")
    retries = [e for e in store.streams.load(TENANT, run_id) if e.type == ev.RETRY_SCHEDULED]
    assert len(retries) == 1
    app.advance(timedelta(minutes=10))
    stream = store.streams.load(TENANT, run_id)
    retries = [e for e in stream if e.type == ev.RETRY_SCHEDULED]
    resumed = [e for e in stream if e.type == ev.STEP_RESUMED]
    assert [e.payload["attempt"] for e in retries] == [1, 2]
    # Each retry resumed exactly when its backoff said, not at the next minute tick.
    for retry, resume in zip(retries, resumed, strict=True):
        assert resume.recorded_at == datetime.fromisoformat(retry.payload["wakeAt"])
    assert status(store, run_id) == "completed"
    (synced,) = hooks(app)
    assert synced.json() == {"sku": "SKU-9", "attempt": 3}


def test_a_narrowed_wakeup_rule_leaves_the_order_waiting(
    app: InProcessApp, store: Store, clock: ManualClock
) -> None:
    """Routing really comes from the template: narrow the wakeup rule to a source the
    approval does not come from, and the approval never reaches EventWakeup."""
    app.routes = event_routes(load_template(TEMPLATE), {"AwaitedSources": "com.example.other"})
    put(app, "order.placed", {"orderId": "o-5", "email": "g@example.com", "total": 10})
    results = put(
        app, "order.approved", {"orderId": "o-5", "approver": "x"}, source="com.example.bo"
    )
    assert "EventWakeupFunction" not in results
    assert status(store, run_id_for("order-approval", "o-5")) == "waiting"


def test_the_engines_own_events_are_not_routed(app: InProcessApp, store: Store) -> None:
    results = put(
        app, "user.signed-up", {"userId": "u", "email": "e@example.com"}, source="workflow-runner"
    )
    assert results == {}
    assert store.runs.for_tenant(TENANT) == []
