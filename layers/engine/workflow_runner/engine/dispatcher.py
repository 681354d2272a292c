"""The step dispatcher: deliver mail and webhook requests from the outbox.

A pass records its side effects as ``dispatch_outbox`` rows in its own transaction;
this module delivers them after commit. Rows are claimed with a lease in a short
transaction (``FOR UPDATE SKIP LOCKED``) and delivered outside it, so a slow
webhook never holds a database lock. The outcome is appended to the request's
dispatch stream at version 2 (after ``step.dispatch-requested`` at version 1): the
optimistic-concurrency append is what makes a request settle exactly once even if
two dispatchers delivered it after a lease ran out; the ``Idempotency-Key`` header
(the request id) lets the receiver drop that duplicate.

Webhooks go through the SSRF guard (webhook_guard.py).
"""

from __future__ import annotations

import base64
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from ..errors import WorkflowRunnerError
from ..ports import HttpSender, Mailer
from ..redaction import exception_for_log
from ..store import OutboxRow, Store
from ..stream import DISPATCH_STREAM, Dispatched, DispatchFailed
from ..webhook_guard import BlockedDestination, WebhookGuard

log = logging.getLogger("workflow_runner.dispatcher")


class PermanentDeliveryError(WorkflowRunnerError):
    """A delivery failure that another attempt cannot fix (a mailer raises it for
    e.g. a rejected message); anything else a mailer raises counts as transient."""


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
    next_attempt_at: datetime | None = None


@dataclass
class DispatchResult:
    """What one dispatcher run did."""

    outcomes: list[DeliveryOutcome] = field(default_factory=list)
    drained: bool = True

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes if o.outcome == outcome)


class _Transient(Exception):
    def __init__(self, error: str, status: int | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.status = status


class _Permanent(Exception):
    def __init__(self, error: str, status: int | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.status = status


def backoff_seconds(
    attempt: int, rng: random.Random, base: float = 30.0, cap: float = 3600.0
) -> float:
    """Delay before attempt ``attempt + 1``: exponential from ``base``, capped, with
    equal jitter (half fixed, half random) so retries of many requests spread out."""
    ceiling = min(cap, base * 2.0 ** max(0, attempt - 1))
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


def _auth_header(auth: Any) -> dict[str, str]:
    if auth is None:
        return {}
    if (
        isinstance(auth, dict)
        and auth.get("type") == "bearer"
        and isinstance(auth.get("token"), str)
    ):
        return {"authorization": f"Bearer {auth['token']}"}
    if (
        isinstance(auth, dict)
        and auth.get("type") == "basic"
        and isinstance(auth.get("username"), str)
        and isinstance(auth.get("password"), str)
    ):
        raw = f"{auth['username']}:{auth['password']}".encode()
        return {"authorization": "Basic " + base64.b64encode(raw).decode()}
    raise _Permanent("unsupported webhook auth")


def _deliver_webhook(
    request: dict[str, Any],
    request_id: str,
    http: HttpSender,
    guard: WebhookGuard,
    timeout: float,
) -> int:
    url = request.get("url")
    if not isinstance(url, str):
        raise _Permanent("invalid webhook request")
    try:
        guard.check(url)
    except BlockedDestination as error:
        log.warning("webhook refused", extra={"request_id": request_id, "detail": str(error)})
        raise _Permanent("webhook destination refused") from error
    except OSError as error:
        log.warning(
            "webhook host lookup failed",
            extra={"request_id": request_id, "detail": exception_for_log(error)},
        )
        raise _Transient("network error") from error
    headers = {k.lower(): v for k, v in dict(request.get("headers") or {}).items()}
    headers.update(_auth_header(request.get("auth")))
    # Ours last: a workflow cannot override the content type or the idempotency key.
    headers["content-type"] = "application/json"
    headers["idempotency-key"] = request_id
    body = str(request.get("bodyJson") or "null").encode()
    try:
        response = http.send(str(request.get("method") or "POST"), url, headers, body, timeout)
    except BlockedDestination as error:
        log.warning("webhook refused", extra={"request_id": request_id, "detail": str(error)})
        raise _Permanent("webhook destination refused") from error
    except OSError as error:
        log.warning(
            "webhook delivery failed",
            extra={"request_id": request_id, "detail": exception_for_log(error)},
        )
        raise _Transient("network error") from error
    status = response.status
    if 200 <= status < 300:
        return status
    if status == 429 or status >= 500:
        raise _Transient(f"HTTP {status}", status)
    # 3xx included: redirects are never followed (the target could be internal).
    raise _Permanent(f"HTTP {status}", status)


def _deliver_mail(
    request: dict[str, Any], request_id: str, mailer: Mailer, default_sender: str | None
) -> int:
    sender = request.get("from") or default_sender
    if not sender:
        raise _Permanent("mail sender not configured")
    try:
        mailer.send_mail(
            request_id,
            str(sender),
            [str(t) for t in request.get("to") or []],
            str(request.get("subject") or ""),
            str(request.get("body") or ""),
        )
    except PermanentDeliveryError as error:
        log.warning(
            "mail rejected", extra={"request_id": request_id, "detail": exception_for_log(error)}
        )
        raise _Permanent("mail delivery failed") from error
    except Exception as error:
        log.warning(
            "mail delivery failed",
            extra={"request_id": request_id, "detail": exception_for_log(error)},
        )
        raise _Transient("mail delivery failed") from error
    return 200


def _settle(
    store: Store,
    row: OutboxRow,
    outcome: Dispatched | DispatchFailed,
    status: Literal["dispatched", "failed"],
    now: datetime,
) -> bool:
    """Append the outcome (version 2 of the dispatch stream) and close the outbox row,
    in one transaction; False when another dispatcher settled it first."""
    with store.transaction():
        appended = store.streams.append(
            row.tenant_id, row.request_id, DISPATCH_STREAM, 1, [outcome], now
        )
        store.outbox.finish(row.tenant_id, row.request_id, status)
    return appended


def dispatch_pending(
    store: Store,
    now: Callable[[], datetime],
    mailer: Mailer,
    http: HttpSender,
    guard: WebhookGuard,
    mail_sender: str | None = None,
    max_attempts: int = 5,
    timeout: float = 10.0,
    batch: int = 25,
    budget_seconds: float = 50.0,
    rng: random.Random | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> DispatchResult:
    """Deliver every due pending dispatch request until none is due or the budget ends.

    Args:
        store: the database.
        now: business time (called per claim and per outcome).
        mailer, http: the delivery ports.
        guard: the SSRF guard for webhook URLs.
        mail_sender: From address when the step names none.
        max_attempts: attempts before a transient failure becomes final.
        timeout: per webhook request, seconds.
        batch: rows claimed at once.
        budget_seconds: stop claiming after this long.

    Returns:
        A DispatchResult listing each attempt's outcome. Transient failures (network,
        HTTP 5xx and 429, mail provider errors) are retried with exponential backoff
        and jitter; after ``max_attempts``, or at once for permanent ones, the request
        ends as ``step.dispatch-failed`` with a generic error.
    """
    rng = rng or random.Random()
    started = monotonic()
    result = DispatchResult()
    # The lease must outlast one batch of deliveries, each bounded by the timeout.
    lease = timedelta(seconds=max(60.0, timeout * batch * 2))
    while True:
        if monotonic() - started >= budget_seconds:
            result.drained = False
            return result
        moment = now()
        lease_until = moment + lease
        with store.transaction():
            rows = store.outbox.claim(moment, lease_until, batch)
        for row in rows:
            result.outcomes.append(
                _deliver_one(
                    store,
                    row,
                    now,
                    mailer,
                    http,
                    guard,
                    mail_sender,
                    max_attempts,
                    timeout,
                    lease_until,
                    rng,
                )
            )
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
    lease_until: datetime,
    rng: random.Random,
) -> DeliveryOutcome:
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
    try:
        if not isinstance(request, dict):
            raise _Permanent("invalid dispatch request")
        if kind == "mail.send":
            status = _deliver_mail(request, row.request_id, mailer, mail_sender)
        else:
            status = _deliver_webhook(request, row.request_id, http, guard, timeout)
    except _Transient as failure:
        if attempt < max_attempts:
            moment = now()
            next_at = moment + timedelta(seconds=backoff_seconds(attempt, rng))
            store.outbox.retry(row.tenant_id, row.request_id, next_at, lease_until)
            return DeliveryOutcome(
                **base,
                outcome="retry",
                status=failure.status,
                error=failure.error,
                next_attempt_at=next_at,
            )
        return _fail(store, row, base, failure.error, failure.status, now())
    except _Permanent as failure:
        return _fail(store, row, base, failure.error, failure.status, now())
    _settle(store, row, Dispatched(step_kind=kind, status=status), "dispatched", now())
    return DeliveryOutcome(**base, outcome="dispatched", status=status)


def _fail(
    store: Store,
    row: OutboxRow,
    base: dict[str, Any],
    error: str,
    status: int | None,
    now: datetime,
) -> DeliveryOutcome:
    failed = DispatchFailed(step_kind=row.step_kind, error=error, attempt=base["attempt"])
    _settle(store, row, failed, "failed", now)
    return DeliveryOutcome(**base, outcome="failed", status=status, error=error)
