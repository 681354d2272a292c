"""The step dispatcher: deliver mail and webhook requests from the outbox.

A pass records its side effects as ``dispatch_outbox`` rows in its own transaction;
this module delivers them after commit. Rows are claimed with a lease in a short
transaction (``FOR UPDATE SKIP LOCKED``) and delivered outside it, so a slow
webhook never holds a database lock. The outcome is appended to the request's
dispatch stream at version 2 (after ``step.dispatch-requested`` at version 1): the
optimistic-concurrency append is what makes a request settle exactly once even if
two dispatchers delivered it after a lease ran out; the ``Idempotency-Key`` header
(the request id) lets the receiver drop that duplicate.

Webhooks go through an SSRF guard: http(s) only (plain http only for allow-listed
hosts), and the host must resolve to public addresses only unless it is in the
allow list. The guard's resolution is also what the HTTPS sender connects to, so a
DNS answer cannot change between the check and the connection.
"""

from __future__ import annotations

import base64
import ipaddress
import logging
import random
import re
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal
from urllib.parse import urlsplit

from . import events as ev
from .ports import HttpSender, Mailer
from .store import NewEvent, Store

log = logging.getLogger("workflow_runner.dispatcher")

Resolver = Callable[[str, int], Sequence[str]]

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Cloud metadata endpoints that are not covered by the range checks on every cloud.
_METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254")
)


class BlockedDestination(Exception):
    """A webhook URL or its resolved address is not allowed; never retried."""


class PermanentDeliveryError(Exception):
    """A delivery failure that another attempt cannot fix (a mailer raises it for
    e.g. a rejected message); anything else a mailer raises counts as transient."""


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver returns for host:port (TCP)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def is_public_address(address: str) -> bool:
    """True for a globally routable unicast address (IPv4 or IPv6).

    Private, loopback, link-local, multicast, reserved, unspecified, shared (CGNAT)
    and cloud-metadata addresses are not public, nor is an IPv6 address that embeds
    (IPv4-mapped, 6to4, Teredo, NAT64) an IPv4 address that is not.
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded: ipaddress.IPv4Address | None = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip.teredo is not None:
            embedded = ip.teredo[1]
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return is_public_address(str(embedded))
    if ip in _METADATA:
        return False
    return bool(
        ip.is_global
        and not ip.is_multicast
        and not ip.is_reserved
        and not ip.is_loopback
        and not ip.is_link_local
        and not ip.is_private
        and not ip.is_unspecified
    )


@dataclass(frozen=True)
class WebhookTarget:
    """A checked webhook URL: where to connect and what to send as Host/SNI."""

    scheme: Literal["http", "https"]
    host: str
    port: int
    addresses: tuple[str, ...]


class WebhookGuard:
    """Decides whether a webhook URL may be called, and at which addresses.

    Args:
        allow_hosts: host names (lower case) exempt from the address checks; only
            these may also use plain http (e.g. an internal service).
        resolver: host, port -> addresses (injected in tests).
    """

    def __init__(
        self, allow_hosts: Iterable[str] = (), resolver: Resolver = system_resolver
    ) -> None:
        self.allow_hosts = frozenset(h.lower() for h in allow_hosts)
        self._resolve = resolver

    def check(self, url: str) -> WebhookTarget:
        """Validate a URL and resolve its host to addresses that may be called.

        Raises:
            BlockedDestination: bad scheme or URL, or every/any address is not public
                (a name with one private address among public ones is refused too).
            OSError: the name could not be resolved (transient).
        """
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as error:
            raise BlockedDestination(f"invalid webhook URL: {error}") from error
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower().rstrip(".")
        if scheme not in ("http", "https"):
            raise BlockedDestination(f"webhook URL scheme {scheme!r} is not http(s)")
        if not host:
            raise BlockedDestination("webhook URL has no host")
        if parts.username is not None or parts.password is not None:
            raise BlockedDestination("webhook URL must not carry credentials")
        allowed = host in self.allow_hosts
        if scheme == "http" and not allowed:
            raise BlockedDestination(f"plain http is only allowed for allow-listed hosts ({host})")
        port = port or (443 if scheme == "https" else 80)
        try:
            literal = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            literal = None
        addresses = [str(literal)] if literal is not None else list(self._resolve(host, port))
        if not addresses:
            raise OSError(f"{host} resolved to no address")
        if not allowed:
            for address in addresses:
                if not is_public_address(address):
                    raise BlockedDestination(f"{host} resolves to a non-public address")
        return WebhookTarget(scheme, host, port, tuple(addresses))  # type: ignore[arg-type]


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


_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
_IPV4 = re.compile(r"\b\d{1,3}(\.\d{1,3}){3}\b")
_IPV6 = re.compile(r"\b[0-9a-fA-F]{0,4}(:[0-9a-fA-F]{0,4}){2,7}\b")


def redact(text: str) -> str:
    """Raw error text with mail and IP addresses masked, for the log."""
    return _IPV6.sub("<ip>", _IPV4.sub("<ip>", _EMAIL.sub("<email>", text)))


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
            extra={"request_id": request_id, "detail": redact(str(error))},
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
            extra={"request_id": request_id, "detail": redact(repr(error))},
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
        log.warning("mail rejected", extra={"request_id": request_id, "detail": redact(str(error))})
        raise _Permanent("mail delivery failed") from error
    except Exception as error:
        log.warning(
            "mail delivery failed", extra={"request_id": request_id, "detail": redact(repr(error))}
        )
        raise _Transient("mail delivery failed") from error
    return 200


def _settle(
    store: Store,
    row: dict[str, Any],
    event_type: str,
    payload: dict[str, Any],
    status: str,
    now: datetime,
) -> bool:
    """Append the outcome (version 2 of the dispatch stream) and close the outbox row,
    in one transaction; False when another dispatcher settled it first."""
    with store.transaction():
        appended = store.append(
            row["tenant_id"],
            row["request_id"],
            ev.DISPATCH_STREAM,
            1,
            [NewEvent(type=event_type, payload=payload)],
            now,
        )
        store.execute(
            "finish_dispatch",
            {"tenant_id": row["tenant_id"], "request_id": row["request_id"], "status": status},
        )
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
            rows = store.fetch_all(
                "claim_dispatches", {"now": moment, "lease_until": lease_until, "limit": batch}
            )
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
    row: dict[str, Any],
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
    kind = row["step_kind"]
    attempt = int(row["attempts"])
    base = {
        "tenant_id": row["tenant_id"],
        "request_id": row["request_id"],
        "run_id": row["run_id"],
        "step_kind": kind,
        "attempt": attempt,
    }
    request = row["request"]
    try:
        if not isinstance(request, dict):
            raise _Permanent("invalid dispatch request")
        if kind == "mail.send":
            status = _deliver_mail(request, row["request_id"], mailer, mail_sender)
        else:
            status = _deliver_webhook(request, row["request_id"], http, guard, timeout)
    except _Transient as failure:
        if attempt < max_attempts:
            moment = now()
            next_at = moment + timedelta(seconds=backoff_seconds(attempt, rng))
            store.execute(
                "retry_dispatch",
                {
                    "tenant_id": row["tenant_id"],
                    "request_id": row["request_id"],
                    "next_attempt_at": next_at,
                    "lease_until": lease_until,
                },
            )
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
    _settle(store, row, ev.DISPATCHED, {"stepKind": kind, "status": status}, "dispatched", now())
    return DeliveryOutcome(**base, outcome="dispatched", status=status)


def _fail(
    store: Store,
    row: dict[str, Any],
    base: dict[str, Any],
    error: str,
    status: int | None,
    now: datetime,
) -> DeliveryOutcome:
    payload = {"stepKind": row["step_kind"], "error": error, "attempt": base["attempt"]}
    _settle(store, row, ev.DISPATCH_FAILED, payload, "failed", now)
    return DeliveryOutcome(**base, outcome="failed", status=status, error=error)
