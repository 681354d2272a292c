"""The step dispatcher: delivery, retries with backoff, final failures, erasure."""

from __future__ import annotations

import logging
import random
import uuid
from datetime import timedelta
from typing import Any

import pytest
from workflow_runner import DomainEvent, ManualClock, define_workflow, on_event
from workflow_runner import stream as ev
from workflow_runner.aws.inprocess import CapturedMailer, RecordedRequest, RecordingHttpSender
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine import ingest_domain_event
from workflow_runner.engine.dispatcher import DeliveryPolicy, dispatch_pending
from workflow_runner.ports import HttpResponse, PermanentDeliveryError
from workflow_runner.store import OutboxRow, Store
from workflow_runner.webhook_guard import WebhookGuard

from tests.support import SAMPLE_TENANT as TENANT

PUBLIC = WebhookGuard(resolver=lambda host, port: ["93.184.215.14"])


@pytest.fixture
def notify(registry: WorkflowRegistry) -> WorkflowRegistry:
    registry.register(
        define_workflow(
            name="notify",
            trigger=on_event("thing.happened"),
            steps=lambda s: [
                s.mail_send(
                    to=lambda ctx: ctx.event.payload["email"],
                    subject="Hello",
                    body="Body text",
                    from_=lambda ctx: ctx.event.payload.get("from"),
                ),
                s.webhook_send(
                    url=lambda ctx: ctx.event.payload["url"],
                    body=lambda ctx: {"n": ctx.event.payload["n"]},
                    headers={"x-team": "ops", "Idempotency-Key": "spoofed"},
                ),
            ],
            register=False,
        )
    )
    return registry


def request_dispatches(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, **payload: Any
) -> dict[str, str]:
    body = {"email": "ada@example.com", "url": "https://hooks.example.com/in", "n": 1, **payload}
    event = DomainEvent(str(uuid.uuid4()), "thing.happened", body, TENANT, clock.now(), "tests")
    ingest_domain_event(store, event, clock.now(), registry)
    rows = store.conn.execute(
        "SELECT request_id::text AS request_id, step_kind FROM dispatch_outbox"
        " WHERE tenant_id = %s",
        (TENANT,),
    ).fetchall()
    return {r["step_kind"]: r["request_id"] for r in rows}


def outbox(store: Store, request_id: str) -> OutboxRow:
    row = store.outbox.get(TENANT, request_id)
    assert row is not None
    return row


def dispatch_stream(store: Store, request_id: str) -> list[tuple[int, str, dict[str, Any]]]:
    return [(e.version, e.type, e.payload) for e in store.streams.load(TENANT, request_id)]


def run(store: Store, clock: ManualClock, mailer: Any, http: Any, **kw: Any) -> Any:
    return dispatch_pending(
        store,
        clock.now,
        mailer,
        http,
        kw.pop("guard", PUBLIC),
        mail_sender="noreply@example.com",
        max_attempts=kw.pop("max_attempts", 3),
        rng=random.Random(7),
        **kw,
    )


def test_delivers_mail_and_webhook_and_erases_the_requests(
    store: Store, notify: WorkflowRegistry, clock: ManualClock
) -> None:
    ids = request_dispatches(store, notify, clock)
    mailer, http = CapturedMailer(), RecordingHttpSender()
    result = run(store, clock, mailer, http)
    assert result.count("dispatched") == 2

    (mail,) = mailer.sent
    assert (mail.sender, mail.to, mail.subject) == (
        "noreply@example.com",
        ("ada@example.com",),
        "Hello",
    )
    assert mail.request_id == ids["mail.send"]
    (call,) = http.requests
    assert call.url == "https://hooks.example.com/in" and call.method == "POST"
    assert call.headers["content-type"] == "application/json"
    assert call.headers["idempotency-key"] == ids["webhook.send"]  # ours, not the workflow's
    assert call.headers["x-team"] == "ops"
    assert call.json() == {"n": 1}
    assert call.timeout == 10.0

    for kind, request_id in ids.items():
        row = outbox(store, request_id)
        assert (row.status, row.request, row.attempts) == ("dispatched", None, 1)
        stream = dispatch_stream(store, request_id)
        assert stream[0][:2] == (1, ev.DISPATCH_REQUESTED)
        assert stream[1] == (2, ev.DISPATCHED, {"stepKind": kind, "status": 200, "attempt": 1})
    # Nothing left: a second run delivers nothing again.
    assert run(store, clock, mailer, http).outcomes == []
    assert len(mailer.sent) == 1 and len(http.requests) == 1


def test_workflow_from_address_wins_over_the_default(
    store: Store, notify: WorkflowRegistry, clock: ManualClock
) -> None:
    request_dispatches(store, notify, clock, **{"from": "team@example.com"})
    mailer = CapturedMailer()
    run(store, clock, mailer, RecordingHttpSender())
    assert mailer.sent[0].sender == "team@example.com"


def test_transient_failures_back_off_then_fail_for_good(
    store: Store, notify: WorkflowRegistry, clock: ManualClock
) -> None:
    ids = request_dispatches(store, notify, clock)
    hook = ids["webhook.send"]
    http = RecordingHttpSender(respond=lambda r: HttpResponse(503))
    first = run(store, clock, CapturedMailer(), http)
    (retry,) = [o for o in first.outcomes if o.step_kind == "webhook.send"]
    assert (retry.outcome, retry.error, retry.attempt) == ("retry", "HTTP 503", 1)
    delay = (retry.next_attempt_at - clock.now()).total_seconds()
    assert 15 <= delay <= 30  # attempt 1: base 30 s with equal jitter
    row = outbox(store, hook)
    assert row.status == "pending" and row.request is not None and row.leased_until is None

    # Not due yet: nothing is claimed.
    assert run(store, clock, CapturedMailer(), http).outcomes == []
    clock.advance(timedelta(seconds=31))
    second = run(store, clock, CapturedMailer(), http)
    assert [(o.outcome, o.attempt) for o in second.outcomes] == [("retry", 2)]
    assert 30 <= (second.outcomes[0].next_attempt_at - clock.now()).total_seconds() <= 60
    clock.advance(timedelta(seconds=61))
    third = run(store, clock, CapturedMailer(), http)
    assert [(o.outcome, o.error) for o in third.outcomes] == [("failed", "HTTP 503")]
    assert len(http.requests) == 3
    # Every attempt is on the request's stream: two that failed, then the outcome.
    stream = dispatch_stream(store, hook)
    assert [(v, t) for v, t, _ in stream] == [
        (1, ev.DISPATCH_REQUESTED),
        (2, ev.DISPATCH_ATTEMPT_FAILED),
        (3, ev.DISPATCH_ATTEMPT_FAILED),
        (4, ev.DISPATCH_FAILED),
    ]
    assert [p["attempt"] for _, _, p in stream[1:]] == [1, 2, 3]
    assert stream[1][2]["status"] == 503 and "retryAt" in stream[1][2]
    assert stream[3][2] == {
        "stepKind": "webhook.send",
        "error": "HTTP 503",
        "attempt": 3,
        "reason": "exhausted",
        "status": 503,
    }
    row = outbox(store, hook)
    # A failed request keeps its payload, so an operator can redeliver it.
    assert (row.status, row.failure_reason, row.stream_version) == ("failed", "exhausted", 4)
    assert row.request is not None


@pytest.mark.parametrize(
    ("respond", "outcome", "error"),
    [
        (lambda r: HttpResponse(429), "retry", "HTTP 429"),
        (lambda r: HttpResponse(500), "retry", "HTTP 500"),
        (lambda r: HttpResponse(404), "failed", "HTTP 404"),
        (
            lambda r: HttpResponse(302, {"location": "http://169.254.169.254/"}),
            "failed",
            "HTTP 302",
        ),
        (lambda r: HttpResponse(204), "dispatched", None),
    ],
)
def test_http_status_classification(
    store: Store,
    notify: WorkflowRegistry,
    clock: ManualClock,
    respond: Any,
    outcome: str,
    error: str | None,
) -> None:
    request_dispatches(store, notify, clock)
    result = run(store, clock, CapturedMailer(), RecordingHttpSender(respond=respond))
    (hook,) = [o for o in result.outcomes if o.step_kind == "webhook.send"]
    assert (hook.outcome, hook.error) == (outcome, error)


def test_network_error_is_transient_and_raw_text_stays_in_the_log(
    store: Store, notify: WorkflowRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    ids = request_dispatches(store, notify, clock)

    def refuse(request: RecordedRequest) -> HttpResponse:
        raise ConnectionRefusedError("connect to 10.9.8.7 for ada@example.com refused")

    with caplog.at_level(logging.WARNING, logger="workflow_runner.dispatcher"):
        result = run(
            store, clock, CapturedMailer(), RecordingHttpSender(respond=refuse), max_attempts=1
        )
    (hook,) = [o for o in result.outcomes if o.step_kind == "webhook.send"]
    assert (hook.outcome, hook.error) == ("failed", "network error")
    stored = dispatch_stream(store, ids["webhook.send"])[1][2]
    assert stored == {
        "stepKind": "webhook.send",
        "error": "network error",
        "attempt": 1,
        "reason": "exhausted",
    }
    details = " ".join(str(getattr(r, "detail", "")) for r in caplog.records)
    assert "refused" in details
    assert "ada@example.com" not in details and "10.9.8.7" not in details


def test_private_destination_is_refused_without_a_request(
    store: Store, notify: WorkflowRegistry, clock: ManualClock
) -> None:
    request_dispatches(store, notify, clock, url="https://internal.example.com/x")
    http = RecordingHttpSender()
    guard = WebhookGuard(resolver=lambda host, port: ["10.0.0.5"])
    result = run(store, clock, CapturedMailer(), http, guard=guard)
    (hook,) = [o for o in result.outcomes if o.step_kind == "webhook.send"]
    assert (hook.outcome, hook.error, hook.reason) == (
        "failed",
        "webhook destination refused",
        "refused",
    )
    assert http.requests == []


def test_mail_failures(store: Store, notify: WorkflowRegistry, clock: ManualClock) -> None:
    ids = request_dispatches(store, notify, clock)
    mailer = CapturedMailer()
    mailer.fail_next = 1
    first = run(store, clock, mailer, RecordingHttpSender())
    (mail,) = [o for o in first.outcomes if o.step_kind == "mail.send"]
    assert (mail.outcome, mail.error) == ("retry", "mail delivery failed")

    class Rejecting(CapturedMailer):
        def send_mail(self, *args: Any) -> str:
            raise PermanentDeliveryError("SES MessageRejected: ada@example.com is on a list")

    clock.advance(timedelta(minutes=5))
    second = run(store, clock, Rejecting(), RecordingHttpSender())
    assert [(o.outcome, o.error, o.attempt) for o in second.outcomes] == [
        ("failed", "mail delivery failed", 2)
    ]
    assert "ada@example.com" not in str(dispatch_stream(store, ids["mail.send"]))


def test_no_sender_anywhere_fails_the_mail(
    store: Store, notify: WorkflowRegistry, clock: ManualClock
) -> None:
    request_dispatches(store, notify, clock)
    result = dispatch_pending(
        store, clock.now, CapturedMailer(), RecordingHttpSender(), PUBLIC, mail_sender=None
    )
    (mail,) = [o for o in result.outcomes if o.step_kind == "mail.send"]
    assert (mail.outcome, mail.error) == ("failed", "mail sender not configured")


def test_leased_rows_are_not_claimed_twice(
    store: Store, notify: WorkflowRegistry, clock: ManualClock, db_url: str
) -> None:
    request_dispatches(store, notify, clock)
    store.outbox.claim(clock.now(), clock.now() + timedelta(minutes=5), 10)
    http = RecordingHttpSender()
    assert run(store, clock, CapturedMailer(), http).outcomes == []
    clock.advance(timedelta(minutes=6))  # the lease ran out: the rows are taken again
    result = run(store, clock, CapturedMailer(), http)
    assert sorted(o.attempt for o in result.outcomes) == [2, 2]


def test_budget_stops_before_claiming(
    store: Store, notify: WorkflowRegistry, clock: ManualClock
) -> None:
    request_dispatches(store, notify, clock)
    result = run(store, clock, CapturedMailer(), RecordingHttpSender(), seconds_left=lambda: 0.0)
    assert result.outcomes == [] and result.drained is False


@pytest.mark.parametrize("attempt", [1, 2, 3, 8, 20])
def test_backoff_grows_exponentially_within_jitter_and_cap(attempt: int) -> None:
    ceiling = min(3600.0, 30.0 * 2 ** (attempt - 1))
    policy = DeliveryPolicy(max_attempts=30)
    samples = [policy.delay(attempt, random.Random(seed)).total_seconds() for seed in range(50)]
    assert all(ceiling / 2 <= s <= ceiling for s in samples)
    assert len(set(samples)) > 1  # jittered


def test_a_mail_cut_off_between_the_provider_and_the_settle_is_not_sent_again(
    store: Store, notify: WorkflowRegistry, clock: ManualClock
) -> None:
    ids = request_dispatches(store, notify, clock)
    # A dispatcher claims the mail, marks it as being sent, hands it to the provider
    # and dies before it records the outcome.
    with store.transaction():
        claimed = store.outbox.claim(clock.now(), clock.now() + timedelta(seconds=30), 10)
    (mail_row,) = [r for r in claimed if r.step_kind == "mail.send"]
    store.outbox.mark_sending(mail_row, clock.now())
    mailer = CapturedMailer()
    mailer.send_mail(mail_row.request_id, "noreply@example.com", ["ada@example.com"], "s", "b")
    clock.advance(timedelta(seconds=31))  # the lease ends

    result = run(store, clock, mailer, RecordingHttpSender())
    (mail,) = [o for o in result.outcomes if o.step_kind == "mail.send"]
    assert (mail.outcome, mail.reason) == ("failed", "ambiguous")
    assert len(mailer.sent) == 1  # at most once: the cut-off send is not repeated
    final = dispatch_stream(store, ids["mail.send"])[-1]
    assert final[1] == ev.DISPATCH_FAILED and final[2]["reason"] == "ambiguous"
    row = outbox(store, ids["mail.send"])
    assert (row.status, row.failure_reason) == ("failed", "ambiguous")


def test_a_provider_error_is_not_a_send_and_is_retried(
    store: Store, notify: WorkflowRegistry, clock: ManualClock
) -> None:
    ids = request_dispatches(store, notify, clock)
    mailer = CapturedMailer()
    mailer.fail_next = 1  # the provider answered with an error: nothing was sent
    first = run(store, clock, mailer, RecordingHttpSender())
    (mail,) = [o for o in first.outcomes if o.step_kind == "mail.send"]
    assert mail.outcome == "retry"
    assert outbox(store, ids["mail.send"]).sending_since is None
    clock.advance(timedelta(minutes=2))
    second = run(store, clock, mailer, RecordingHttpSender())
    assert [o.outcome for o in second.outcomes] == ["dispatched"]
    assert len(mailer.sent) == 1
