"""The engine's ports implemented with AWS: SQS, Lambda async invoke, SES, HTTPS."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import ssl
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from ..engine.delivery import MAX_RESPONSE_BYTES
from ..engine.enqueue import MAX_DELAY_SECONDS
from ..ports import DeliveryOutcomeUnknown, HttpResponse, PermanentDeliveryError, ResumeRequest
from ..webhook_guard import WebhookGuard

log = logging.getLogger("workflow_runner.aws")

SQS_BATCH = 10  # send_message_batch takes at most 10 entries


def resume_message(request: ResumeRequest) -> dict[str, Any]:
    """The resume queue's message body: {"tenantId", "runId", "stepIndex", "force"?}."""
    body: dict[str, Any] = {
        "tenantId": request.tenant_id,
        "runId": request.run_id,
        "stepIndex": request.step_index,
    }
    if request.force:
        body["force"] = True
    return body


class SqsResumeQueue:
    """ResumeQueue on SQS: batches of 10, per-message DelaySeconds (0..900).

    `early_seconds`: how long before its due time ResumeRun holds a request
    (RESUME_HOLD_SECONDS); delays are rounded to arrive within that window.
    """

    def __init__(self, client: Any, queue_url: str, early_seconds: float = 0.0) -> None:
        self._client = client
        self._url = queue_url
        self.early_seconds = early_seconds

    def send(self, requests: Sequence[ResumeRequest]) -> list[ResumeRequest]:
        """Enqueue requests; return those SQS refused (the caller releases their lease)."""
        refused: list[ResumeRequest] = []
        for start in range(0, len(requests), SQS_BATCH):
            chunk = list(requests[start : start + SQS_BATCH])
            entries = [
                {
                    "Id": str(i),
                    "MessageBody": json.dumps(resume_message(r), separators=(",", ":")),
                    "DelaySeconds": max(0, min(MAX_DELAY_SECONDS, r.delay_seconds)),
                }
                for i, r in enumerate(chunk)
            ]
            try:
                reply = self._client.send_message_batch(QueueUrl=self._url, Entries=entries)
            except Exception as error:  # network or throttling: the whole chunk is refused
                log.warning("resume queue send failed: %r", error)
                refused.extend(chunk)
                continue
            for failed in reply.get("Failed", []):
                log.warning("resume queue refused a message: %s", failed.get("Code"))
                refused.append(chunk[int(failed["Id"])])
        return refused


class LambdaNudger:
    """Nudger by asynchronous Lambda invoke (InvocationType=Event): fire and forget.

    A lost nudge only delays work until the function's schedule safety net runs, so
    failures are logged, never raised into the caller's (already committed) work.
    """

    def __init__(
        self, client: Any, projection_function: str | None, dispatcher_function: str | None
    ) -> None:
        self._client = client
        self._projection = projection_function
        self._dispatcher = dispatcher_function

    def _invoke(self, function: str | None) -> None:
        if not function:
            return
        try:
            self._client.invoke(
                FunctionName=function, InvocationType="Event", Payload=b'{"source":"nudge"}'
            )
        except Exception as error:
            log.warning("nudge of %s failed: %r", function, error)

    def nudge_projection(self) -> None:
        self._invoke(self._projection)

    def nudge_dispatcher(self) -> None:
        self._invoke(self._dispatcher)


# SES error codes that another attempt cannot fix.
_PERMANENT_SES_CODES = frozenset(
    {"MessageRejected", "MailFromDomainNotVerifiedException", "InvalidParameterValue"}
)


# botocore errors raised after the request was sent: SES may have accepted the message.
_UNKNOWN_OUTCOME_ERRORS = frozenset(
    {"ReadTimeoutError", "ConnectionClosedError", "ResponseStreamingError"}
)


class SesMailer:
    """Mailer on SES (v1 SendEmail, plain text)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def send_mail(
        self, request_id: str, sender: str, to: Sequence[str], subject: str, body: str
    ) -> str:
        """Send one mail; return the SES message id.

        Raises:
            PermanentDeliveryError: SES rejected the message for good.
            DeliveryOutcomeUnknown: the request went out but no answer came back (a
                read timeout, a dropped connection): SES may have sent it.
            Exception: anything else (throttling, no connection): it was not sent.
        """
        try:
            reply = self._client.send_email(
                Source=sender,
                Destination={"ToAddresses": list(to)},
                Message={
                    "Subject": {"Data": subject, "Charset": "UTF-8"},
                    "Body": {"Text": {"Data": body, "Charset": "UTF-8"}},
                },
            )
        except Exception as error:
            code = getattr(error, "response", {}).get("Error", {}).get("Code")
            if code in _PERMANENT_SES_CODES:
                raise PermanentDeliveryError(f"SES {code}: {error}") from error
            if type(error).__name__ in _UNKNOWN_OUTCOME_ERRORS:
                raise DeliveryOutcomeUnknown(f"SES: {error!r}") from error
            raise
        return str(reply["MessageId"])


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to a given address while speaking to ``host`` (Host header)."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """TLS to a given address, with SNI and certificate checks for ``host``."""

    def __init__(
        self, host: str, port: int, address: str, timeout: float, context: ssl.SSLContext
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._address = address
        self._tls = context

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(raw, server_hostname=self.host)


class PinnedHttpSender:
    """HttpSender on the standard library that connects only to guard-checked addresses.

    The host is resolved and checked by the WebhookGuard, and the connection goes to
    one of exactly those addresses (no second lookup an attacker's DNS could answer
    differently), with Host and TLS SNI set to the URL's host. Redirects are never
    followed: http.client does not follow them and the caller treats 3xx as failure.
    """

    def __init__(self, guard: WebhookGuard, context: ssl.SSLContext | None = None) -> None:
        self._guard = guard
        self._context = context or ssl.create_default_context()

    def send(
        self, method: str, url: str, headers: dict[str, str], body: bytes, timeout: float
    ) -> HttpResponse:
        """One request; raises OSError on network failure, BlockedDestination when refused."""
        target = self._guard.check(url)
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        last_error: OSError | None = None
        for address in target.addresses:
            conn: http.client.HTTPConnection
            if target.scheme == "https":
                conn = _PinnedHTTPSConnection(
                    target.host, target.port, address, timeout, self._context
                )
            else:
                conn = _PinnedHTTPConnection(target.host, target.port, address, timeout)
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                body = response.read(MAX_RESPONSE_BYTES + 1)  # one more tells "there was more"
                return HttpResponse(
                    response.status, {k.lower(): v for k, v in response.getheaders()}, body
                )
            except ConnectionRefusedError as error:
                last_error = error  # try the host's next address
            except http.client.HTTPException as error:
                raise OSError(f"bad HTTP response: {error!r}") from error
            finally:
                conn.close()
        assert last_error is not None
        raise last_error
