"""The step dispatcher: deliver fire-and-forget mail and webhook requests from the outbox.

A pass records its side effects as ``dispatch_outbox`` rows in its own transaction;
this module delivers them after commit. Rows are claimed with a short lease in a short
transaction (``FOR UPDATE SKIP LOCKED``) and delivered outside it, so a slow webhook
never holds a database lock. Every attempt's outcome is appended to the request's
dispatch stream (``step.dispatch-attempt-failed``, then ``step.dispatched`` or
``step.dispatch-failed``) at the version after the one its row holds: that
optimistic-concurrency append is what makes an attempt settle once even if two
dispatchers delivered it after a lease ran out.

Guarantees (docs/workflows/mail-and-webhooks.md):
- webhooks: at least once, with the request id as Idempotency-Key header, the same on
  every attempt, for the receiver to drop duplicates;
- mail: at most once. Before a mail is handed to the provider the row is marked
  (``sending_since``) in a statement of its own; a claim that finds the mark after a
  lease ran out cannot know whether the mail left, so it ends the request as
  ``ambiguous`` (reason on the stream) for an operator to check instead of sending again.

Time: every call is bounded by the time the function has left (`seconds_left`), and a
row the dispatcher could not start goes back at once with its attempt uncounted.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from ..definition import backoff_seconds
from ..ports import HttpSender, Mailer
from ..store import OutboxRow, Store
from ..stream import DISPATCH_STREAM, DispatchAttemptFailed, Dispatched, DispatchFailed
from ..webhook_guard import WebhookGuard
from .delivery import DeliveryFailed, deliver_mail, deliver_webhook

log = logging.getLogger("workflow_runner.dispatcher")

# A call is not started with less time left than this (seconds): it could not finish.
MIN_CALL_SECONDS = 1.0
# Time kept for recording an outcome after a call returns.
SETTLE_MARGIN_SECONDS = 2.0


@dataclass(frozen=True)
class DeliveryOutcome:
    """The result of one delivery attempt."""

    tenant_id: str
    request_id: str
    run_id: str
    step_kind: str
    attempt: int
    outcome: Literal["dispatched", "retry", "failed"]
    status: int | None = None
    error: str | None = None  # generic text, stored
    reason: str | None = None  # of a failure: refused, rejected, exhausted, ambiguous
    next_attempt_at: datetime | None = None


@dataclass
class DispatchResult:
    """What one dispatcher run did."""

    outcomes: list[DeliveryOutcome] = field(default_factory=list)
    drained: bool = True

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes if o.outcome == outcome)


@dataclass(frozen=True)
class DeliveryPolicy:
    """Attempts and backoff of a request: its step's RetryPolicy, or the defaults
    (exponential from 30 s, capped at an hour, equal jitter)."""

    max_attempts: int
    backoff: str = "exponential"
    base: str = "PT30S"
    cap: str = "PT1H"
    jitter: str = "equal"

    @classmethod
    def of(cls, request: dict[str, Any] | None, default_attempts: int) -> DeliveryPolicy:
        retry = (request or {}).get("retry")
        if not isinstance(retry, dict):
            return cls(default_attempts)
        return cls(
            int(retry.get("maxAttempts") or default_attempts),
            str(retry.get("backoff") or "exponential"),
            str(retry.get("base") or "PT30S"),
            str(retry.get("cap") or "PT1H"),
            str(retry.get("jitter") or "equal"),
        )

    def delay(self, failed_attempt: int, rng: random.Random) -> timedelta:
        seconds = backoff_seconds(
            self.backoff, self.base, self.cap, self.jitter, failed_attempt, rng.random
        )
        return timedelta(seconds=seconds)


def _record(
    store: Store,
    row: OutboxRow,
    fact: Dispatched | DispatchFailed | DispatchAttemptFailed,
    now: datetime,
    update: Callable[[int], None],
) -> bool:
    """Append an attempt's outcome after the stream version the row holds and update
    the row, in one transaction; False when another dispatcher recorded it first."""
    with store.transaction():
        if not store.streams.append(
            row.tenant_id, row.request_id, DISPATCH_STREAM, row.stream_version, [fact], now
        ):
            return False
        update(row.stream_version + 1)
    return True


def dispatch_pending(
    store: Store,
    now: Callable[[], datetime],
    mailer: Mailer,
    http: HttpSender,
    guard: WebhookGuard,
    mail_sender: str | None = None,
    max_attempts: int = 5,
    timeout: float = 10.0,
    batch: int = 10,
    seconds_left: Callable[[], float] = lambda: 50.0,
    rng: random.Random | None = None,
) -> DispatchResult:
    """Deliver due fire-and-forget requests until none is due or the time runs out.

    Args:
        store: the database.
        now: business time (called per claim and per outcome).
        mailer, http: the delivery ports.
        guard: the SSRF guard for webhook URLs.
        mail_sender: From address when the step names none.
        max_attempts: attempts of a request whose step names no RetryPolicy.
        timeout: per webhook call, seconds (further bounded by the time left).
        batch: rows claimed at once.
        seconds_left: the time the caller has left (in Lambda: the remaining time
            minus a margin); checked before every call.

    Returns:
        A DispatchResult listing each attempt's outcome; `drained` is False when the
        time ran out with requests still due.
    """
    rng = rng or random.Random()
    result = DispatchResult()
    while True:
        left = seconds_left()
        if left < MIN_CALL_SECONDS + SETTLE_MARGIN_SECONDS:
            result.drained = False
            return result
        moment = now()
        # A lease no longer than the time this invocation has: a row it does not get to
        # is due again soon after, never after a long lease.
        lease_until = moment + timedelta(seconds=left + SETTLE_MARGIN_SECONDS)
        with store.transaction():
            rows = store.outbox.claim(moment, lease_until, batch)
        for index, row in enumerate(rows):
            left = seconds_left() - SETTLE_MARGIN_SECONDS
            if left < MIN_CALL_SECONDS:
                for unstarted in rows[index:]:
                    store.outbox.release(unstarted, now())
                result.drained = False
                return result
            outcome = _deliver_one(
                store,
                row,
                now,
                mailer,
                http,
                guard,
                mail_sender,
                max_attempts,
                min(timeout, left),
                rng,
            )
            if outcome is not None:
                result.outcomes.append(outcome)
        if len(rows) < batch:
            return result


def _deliver_one(
    store: Store,
    row: OutboxRow,
    now: Callable[[], datetime],
    mailer: Mailer,
    http: HttpSender,
    guard: WebhookGuard,
    mail_sender: str | None,
    max_attempts: int,
    timeout: float,
    rng: random.Random,
) -> DeliveryOutcome | None:
    kind = row.step_kind
    attempt = row.attempts
    base: dict[str, Any] = {
        "tenant_id": row.tenant_id,
        "request_id": row.request_id,
        "run_id": row.run_id,
        "step_kind": kind,
        "attempt": attempt,
    }
    request = row.request
    policy = DeliveryPolicy.of(request, max_attempts)
    try:
        if not isinstance(request, dict):
            raise DeliveryFailed("rejected", "invalid dispatch request", "RequestInvalid")
        if kind == "mail.send":
            if row.sending_since is not None:
                # The last attempt handed the mail to the provider and never recorded
                # what happened: it may have been sent. At most once: do not resend.
                raise DeliveryFailed("ambiguous", "mail delivery ambiguous", "MailAmbiguous")
            store.outbox.mark_sending(row, now())
            deliver_mail(request, row.request_id, mailer, mail_sender, base)
            status = 200
        else:
            status = deliver_webhook(request, row.request_id, http, guard, timeout, base).status
    except DeliveryFailed as failure:
        error_text = failure.error
        if failure.kind == "transient" and attempt < policy.max_attempts:
            moment = now()
            next_at = moment + policy.delay(attempt, rng)
            attempt_failed = DispatchAttemptFailed(
                step_kind=kind,
                attempt=attempt,
                error=failure.error,
                status=failure.status,
                retry_at=next_at,
            )
            if not _record(
                store,
                row,
                attempt_failed,
                moment,
                lambda version: store.outbox.retry(row, next_at, version, error_text),
            ):
                return None
            return DeliveryOutcome(
                **base,
                outcome="retry",
                status=failure.status,
                error=failure.error,
                next_attempt_at=next_at,
            )
        reason = "exhausted" if failure.kind == "transient" else failure.kind
        return _fail(store, row, base, failure.error, reason, failure.status, now())
    moment = now()
    delivered = Dispatched(step_kind=kind, status=status, attempt=attempt)
    if not _record(
        store,
        row,
        delivered,
        moment,
        lambda version: store.outbox.settle(row, "dispatched", version, moment),
    ):
        return None
    return DeliveryOutcome(**base, outcome="dispatched", status=status)


def _fail(
    store: Store,
    row: OutboxRow,
    base: dict[str, Any],
    error: str,
    reason: str,
    status: int | None,
    now: datetime,
) -> DeliveryOutcome | None:
    failed = DispatchFailed(
        step_kind=row.step_kind, error=error, attempt=base["attempt"], reason=reason, status=status
    )
    if not _record(
        store,
        row,
        failed,
        now,
        lambda version: store.outbox.settle(row, "failed", version, now, error, reason),
    ):
        return None
    log.warning(
        "delivery failed",
        extra={
            "tenant_id": row.tenant_id,
            "request_id": row.request_id,
            "run_id": row.run_id,
            "reason": reason,
        },
    )
    return DeliveryOutcome(**base, outcome="failed", status=status, error=error, reason=reason)
