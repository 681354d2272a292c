"""The SSRF guard for webhooks: which URLs may be called, and at which addresses.

http(s) only (plain http only for allow-listed hosts), and the host must resolve to
public addresses only unless it is in the allow list. The guard's resolution is also
what the HTTPS sender connects to, so a DNS answer cannot change between the check
and the connection.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from .errors import WorkflowRunnerError

Resolver = Callable[[str, int], Sequence[str]]

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Cloud metadata endpoints that are not covered by the range checks on every cloud.
_METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254")
)


class BlockedDestination(WorkflowRunnerError):
    """A webhook URL or its resolved address is not allowed; never retried."""


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
