"""Delivering one mail or webhook request: the transport shared by fire-and-forget
dispatches (dispatcher.py) and delivery tasks (tasks.py).

Failures are classified, never raised raw: `transient` (worth another attempt: a
network error, HTTP 5xx or 429, a provider error), `rejected` (another attempt cannot
help: HTTP 4xx and 3xx — redirects are never followed —, a bad request), `refused` (the
SSRF guard) and `ambiguous` (a mail that may have been sent). Stored texts are generic;
raw reasons go to the log under the redaction policy (redaction.py).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from ..errors import InvalidInput, WorkflowRunnerError
from ..json_input import MAX_DEPTH, parse_json
from ..ports import DeliveryOutcomeUnknown, HttpSender, Mailer, PermanentDeliveryError
from ..redaction import exception_for_log
from ..storable import reject_unstorable
from ..webhook_guard import BlockedDestination, WebhookGuard

log = logging.getLogger("workflow_runner.dispatcher")

MAX_RESPONSE_BYTES = 64 * 1024

FailureKind = Literal["transient", "rejected", "refused", "ambiguous"]


class DeliveryFailed(WorkflowRunnerError):
    """One delivery attempt failed.

    Args:
        kind: transient | rejected | refused | ambiguous (see the module docstring).
        error: generic text that may be stored (HTTP 503, network error, ...).
        error_class: what a delivery task records as its error class.
        status: the HTTP status, if the endpoint answered.
    """

    def __init__(
        self, kind: FailureKind, error: str, error_class: str, status: int | None = None
    ) -> None:
        super().__init__(error)
        self.kind: FailureKind = kind
        self.error = error
        self.error_class = error_class
        self.status = status


@dataclass(frozen=True)
class WebhookReply:
    """A 2xx answer: its status and body (parsed JSON, or text, at most 64 KB)."""

    status: int
    body: Any


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
    raise DeliveryFailed("rejected", "unsupported webhook auth", "WebhookAuthInvalid")


def response_body(raw: bytes) -> Any:
    """A response body as a workflow sees it: JSON when it parses (and fits), else text,
    at most 64 KB; characters PostgreSQL cannot store are replaced."""
    try:
        # The task's result {"status", "body"} is the first of its MAX_DEPTH levels.
        value = parse_json(raw, "response", max_bytes=MAX_RESPONSE_BYTES, max_depth=MAX_DEPTH - 1)
        reject_unstorable(value, "response")
        return value
    except InvalidInput:  # NotStorable too
        pass
    text = raw[:MAX_RESPONSE_BYTES].decode("utf-8", "replace")
    return text.replace("\x00", "\ufffd")


def deliver_webhook(
    request: dict[str, Any],
    request_id: str,
    http: HttpSender,
    guard: WebhookGuard,
    timeout: float,
    log_extra: Mapping[str, object] | None = None,
) -> WebhookReply:
    """Call a webhook once (Idempotency-Key: `request_id`); its 2xx answer.

    Args:
        log_extra: what the log lines of a failure carry besides the request id (the
            tenant and run, so a reader, the local runtime's log included, can place it).

    Raises:
        DeliveryFailed: classified as above.
    """
    context = {"request_id": request_id, **(log_extra or {})}
    url = request.get("url")
    if not isinstance(url, str):
        raise DeliveryFailed("rejected", "invalid webhook request", "WebhookRequestInvalid")
    try:
        guard.check(url)
    except BlockedDestination as error:
        log.warning("webhook refused", extra={**context, "detail": str(error)})
        raise DeliveryFailed("refused", "webhook destination refused", "WebhookRefused") from error
    except OSError as error:
        # The host is the URL's, not the exception's text: it tells which name did not
        # resolve (e.g. a sample's hooks.example.com, to redirect to a local sink).
        host = urlsplit(url).hostname or url
        log.warning(
            "webhook host lookup failed for %s",
            host,
            extra={**context, "host": host, "detail": exception_for_log(error)},
        )
        raise DeliveryFailed("transient", "network error", "NetworkError") from error
    headers = {k.lower(): v for k, v in dict(request.get("headers") or {}).items()}
    headers.update(_auth_header(request.get("auth")))
    # Ours last: a workflow cannot override the content type or the idempotency key.
    headers["content-type"] = "application/json"
    headers["idempotency-key"] = request_id
    body = str(request.get("bodyJson") or "null").encode()
    try:
        response = http.send(str(request.get("method") or "POST"), url, headers, body, timeout)
    except BlockedDestination as error:
        log.warning("webhook refused", extra={**context, "detail": str(error)})
        raise DeliveryFailed("refused", "webhook destination refused", "WebhookRefused") from error
    except OSError as error:
        log.warning(
            "webhook delivery failed", extra={**context, "detail": exception_for_log(error)}
        )
        timed_out = isinstance(error, TimeoutError)
        raise DeliveryFailed(
            "transient",
            "timeout" if timed_out else "network error",
            "WebhookTimeout" if timed_out else "NetworkError",
        ) from error
    status = response.status
    if 200 <= status < 300:
        return WebhookReply(status, response_body(response.body))
    if status == 429 or status >= 500:
        raise DeliveryFailed("transient", f"HTTP {status}", f"HttpStatus{status}", status)
    # 3xx included: redirects are never followed (the target could be internal).
    raise DeliveryFailed("rejected", f"HTTP {status}", f"HttpStatus{status}", status)


def deliver_mail(
    request: dict[str, Any],
    request_id: str,
    mailer: Mailer,
    default_sender: str | None,
    log_extra: Mapping[str, object] | None = None,
) -> str:
    """Send a mail once; the provider's message id (`log_extra`: as for deliver_webhook).

    Raises:
        DeliveryFailed: rejected (no sender, the provider refused it), transient (it was
            not sent) or ambiguous (it may have been sent).
    """
    context = {"request_id": request_id, **(log_extra or {})}
    sender = request.get("from") or default_sender
    if not sender:
        raise DeliveryFailed("rejected", "mail sender not configured", "MailSenderMissing")
    try:
        return mailer.send_mail(
            request_id,
            str(sender),
            [str(t) for t in request.get("to") or []],
            str(request.get("subject") or ""),
            str(request.get("body") or ""),
        )
    except PermanentDeliveryError as error:
        log.warning("mail rejected", extra={**context, "detail": exception_for_log(error)})
        raise DeliveryFailed("rejected", "mail delivery failed", "MailRejected") from error
    except DeliveryOutcomeUnknown as error:
        log.warning(
            "mail delivery outcome unknown",
            extra={**context, "detail": exception_for_log(error)},
        )
        raise DeliveryFailed(
            "ambiguous", "mail delivery ambiguous", "MailDeliveryAmbiguous"
        ) from error
    except Exception as error:
        log.warning(
            "mail delivery failed",
            extra={**context, "detail": exception_for_log(error)},
        )
        raise DeliveryFailed("transient", "mail delivery failed", "MailDeliveryFailed") from error
