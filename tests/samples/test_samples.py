"""The seeds' in-memory sample tests (seeds/002), as integration tests on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sample_workflows
from workflow_runner import DomainEvent, ManualClock, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.definition.dsl import CronTrigger, EventTrigger
from workflow_runner.store import Store

from tests.support import TENANT_A, resume_due, stream, stream_types, trigger


@pytest.fixture
def samples(registry: WorkflowRegistry) -> WorkflowRegistry:
    for wf in (
        sample_workflows.user_onboarding,
        sample_workflows.webhook_delivery,
        sample_workflows.daily_report,
        sample_workflows.order_approval,
        sample_workflows.inventory_sync,
    ):
        registry.register(wf)
    return registry


def _dispatches(store: Store, run_id: str) -> list[dict[str, object]]:
    rows = store.conn.execute(
        "SELECT request_id::text AS request_id, step_kind, request FROM dispatch_outbox"
        " WHERE run_id = %s ORDER BY created_at, request_id",
        (run_id,),
    ).fetchall()
    return list(rows)


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
    store: Store, samples: WorkflowRegistry, clock: ManualClock
) -> None:
    payload = {"email": "x@example.com", "userId": "active-42", "tenantId": TENANT_A}
    trigger(store, samples, "user.signed-up", payload, clock.now())
    run_id = run_id_for("user-onboarding", "onboarding:active-42")

    assert stream_types(store, run_id) == [ev.RUN_STARTED, ev.STEP_WAITING]
    mails = _dispatches(store, run_id)
    assert [m["step_kind"] for m in mails] == ["mail.send"]
    waiting = stream(store, run_id)[1].payload
    assert waiting["definitionFingerprint"] == sample_workflows.user_onboarding.fingerprint
    assert "triggerPayload" not in waiting and "x@example.com" not in str(stream(store, run_id))

    resume_due(store, samples, clock.now() + timedelta(days=1, seconds=1))

    assert stream_types(store, run_id) == [
        ev.RUN_STARTED,
        ev.STEP_WAITING,
        ev.STEP_RESUMED,
        ev.STEP_WAITING,
    ]
    assert _dispatches(store, run_id)[1]["request"]["subject"] == "Engagement tips"  # type: ignore[index]

    resume_due(store, samples, clock.now() + timedelta(days=8, seconds=2))

    assert stream_types(store, run_id)[-1] == ev.RUN_COMPLETED
    hook = _dispatches(store, run_id)[2]
    assert hook["step_kind"] == "webhook.send"
    assert hook["request"]["bodyJson"] == '{"userId":"active-42","stage":"day8"}'  # type: ignore[index]


def test_onboarding_cold_user_gets_the_reminder_branch(
    store: Store, samples: WorkflowRegistry, clock: ManualClock
) -> None:
    trigger(
        store,
        samples,
        "user.signed-up",
        {"email": "cold@example.com", "userId": "cold-1"},
        clock.now(),
    )
    run_id = run_id_for("user-onboarding", "onboarding:cold-1")
    resume_due(store, samples, clock.now() + timedelta(days=1, seconds=1))
    assert _dispatches(store, run_id)[1]["request"]["subject"] == "Getting started"  # type: ignore[index]


def test_webhook_delivery_completes_with_exactly_one_dispatch_request(
    store: Store, samples: WorkflowRegistry, clock: ManualClock
) -> None:
    result = trigger(
        store,
        samples,
        "data.processed",
        {"data": {"id": 7}, "webhookUrl": "https://hooks.example.com/in"},
        clock.now(),
    )
    run_id = result.started[0].run_id
    assert stream_types(store, run_id) == [ev.RUN_STARTED, ev.RUN_COMPLETED]
    requests = _dispatches(store, run_id)
    assert len(requests) == 1
    assert requests[0]["request"]["url"] == "https://hooks.example.com/in"  # type: ignore[index]
    assert requests[0]["request"]["bodyJson"] == '{"id":7}'  # type: ignore[index]
    requested = store.streams.load(TENANT_A, str(requests[0]["request_id"]))
    assert [(e.type, e.payload["stepKind"], e.payload["runId"]) for e in requested] == [
        (ev.DISPATCH_REQUESTED, "webhook.send", run_id)
    ]


def test_daily_report_cron_run_starts_once_per_scheduled_instant(
    store: Store, samples: WorkflowRegistry, clock: ManualClock
) -> None:
    at = datetime(2025, 6, 1, 9, 0, tzinfo=UTC)
    first = ops.start_cron_run(
        store, sample_workflows.daily_report, TENANT_A, at, at + timedelta(seconds=5)
    )
    again = ops.start_cron_run(
        store, sample_workflows.daily_report, TENANT_A, at, at + timedelta(seconds=9)
    )
    assert first is not None and first.outcome == "completed"
    assert again is None
    assert stream_types(store, first.run_id) == [ev.RUN_STARTED, ev.RUN_COMPLETED]
    hook = _dispatches(store, first.run_id)[0]
    assert hook["request"]["bodyJson"] == '{"scheduledAt":"2025-06-01T09:00:00.000000Z"}'  # type: ignore[index]


def test_inventory_sync_retries_twice_then_succeeds(
    store: Store, samples: WorkflowRegistry, clock: ManualClock
) -> None:
    trigger(
        store,
        samples,
        "inventory.changed",
        {"sku": "A-1", "revision": 3, "failAttempts": 2},
        clock.now(),
    )
    run_id = run_id_for("inventory-sync", "A-1:3")
    now = clock.now()
    for _ in range(3):
        now += timedelta(minutes=5)
        resume_due(store, samples, now)
    types = stream_types(store, run_id)
    assert types.count(ev.RETRY_SCHEDULED) == 2
    assert types[-1] == ev.RUN_COMPLETED
    attempts = [e.payload["attempt"] for e in stream(store, run_id) if e.type == ev.RETRY_SCHEDULED]
    assert attempts == [1, 2]
